"""One HTTP request through an ASGI app in-process, its response streamed back as plain messages.

What a Ray Serve engine replica runs for each request the ingress forwards: the replica's own
``create_app(engine)`` app answers it, streaming (SSE) included, and the messages (picklable dicts)
travel back over a Serve streaming handle. When the caller stops reading (the client went away),
the app sees ``http.disconnect`` and aborts the generation.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from stencil.api.asgi import ASGIApp, Message


@dataclass(slots=True)
class ForwardedRequest:
    """An HTTP request as the ingress received it; ``prompt`` is its routing text (or '')."""

    method: str
    path: str
    query_string: bytes = b""
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    body: bytes = b""
    prompt: str = ""


async def call_asgi(app: ASGIApp, request: ForwardedRequest) -> AsyncIterator[dict[str, Any]]:
    """Yield ``{"status", "headers"}`` once, then ``{"body"}`` chunks, as ``app`` answers."""
    messages: asyncio.Queue[Message | BaseException] = asyncio.Queue()
    gone = asyncio.Event()
    sent_body = False

    async def receive() -> Message:
        nonlocal sent_body
        if not sent_body:
            sent_body = True
            return {"type": "http.request", "body": request.body, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        await messages.put(message)

    async def run() -> None:
        try:
            await app(_scope(request), receive, send)
        except BaseException as e:  # surfaced to the reader
            await messages.put(e)
            raise

    task = asyncio.create_task(run())
    try:
        while True:
            message = await messages.get()
            if isinstance(message, BaseException):
                raise message
            if message["type"] == "http.response.start":
                headers = [(bytes(k), bytes(v)) for k, v in message.get("headers", [])]
                yield {"status": message["status"], "headers": headers}
            elif message["type"] == "http.response.body":
                if message.get("body"):
                    yield {"body": bytes(message["body"])}
                if not message.get("more_body", False):
                    return
    finally:
        gone.set()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(task, timeout=10)


async def call_asgi_whole(app: ASGIApp, request: ForwardedRequest) -> dict[str, Any]:
    """The whole response: ``{"status", "headers", "body"}``."""
    response: dict[str, Any] = {"status": 500, "headers": [], "body": b""}
    chunks = []
    async for message in call_asgi(app, request):
        if "status" in message:
            response.update(message)
        else:
            chunks.append(message["body"])
    response["body"] = b"".join(chunks)
    return response


def _scope(request: ForwardedRequest) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": "http",
        "path": request.path,
        "raw_path": request.path.encode(),
        "query_string": request.query_string,
        "root_path": "",
        "headers": request.headers,
        "client": ("127.0.0.1", 0),
        "server": ("127.0.0.1", 80),
        "state": {},
    }
