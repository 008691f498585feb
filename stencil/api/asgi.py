"""Small helpers for the pure-ASGI middlewares (auth, header limits, admission): header lookup and
answering an :class:`APIError` before the app runs."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from stencil.api.errors import APIError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def header(scope: Scope, name: bytes) -> bytes:
    """The first value of header ``name`` (lower-case), or b''."""
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value
    return b""


async def send_error(scope: Scope, send: Send, error: APIError, close: bool = False) -> None:
    """Answer ``error`` as OpenAI's JSON error body (HTTP), or close the websocket."""
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
        return
    body = json.dumps(error.body()).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in error.headers.items()]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
