"""The HTTP front of ``stencil serve --replicas``: one OpenAI endpoint over N engine replicas.

Every API request is forwarded whole (method, path, headers, body) to one replica, whose own
``create_app(engine)`` answers it, and the answer streams back as it comes (SSE included), with an
``x-stencil-replica`` header naming the replica. ``/health`` asks every replica (200 while one is
healthy, the body lists each); ``/metrics`` is every replica's Prometheus text, each sample
labelled ``replica="..."``. A replica lost before it answered -> 503 (OpenAI error body); lost
mid-stream -> an SSE error event, then ``[DONE]``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse

from stencil.api.errors import APIError
from stencil.api.ray.asgi_call import ForwardedRequest
from stencil.api.read_request import read_body
from stencil.api.state import ServerConfig

logger = logging.getLogger(__name__)

PREFIX_CHARS = 1024  # how much of the prompt decides the replica
BROADCAST_TIMEOUT_S = 10.0
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"]


def ingress_app(engines: Any, config: ServerConfig) -> FastAPI:
    """The ingress app around ``engines``, a Serve handle to the engine replica deployment."""
    app = FastAPI(title="Stencil (Ray Serve)", openapi_url=None, docs_url=None, redoc_url=None)

    @app.get("/health")
    async def health() -> Response:
        replies = await _broadcast(engines, ForwardedRequest("GET", "/health"))
        replicas = [_health_entry(r) for r in replies]
        ok = any(r["status"] == "ok" for r in replicas)
        body = {"status": "ok" if ok else "unavailable", "replicas": replicas}
        return JSONResponse(body, status_code=200 if ok else 503)

    @app.get("/metrics")
    async def metrics(request: Request) -> Response:
        replies = await _broadcast(engines, _forwarded(request, b""))
        answered = [r for r in replies if isinstance(r, dict)]
        refused = [r for r in answered if r["status"] != 200]
        if refused:  # e.g. 401 without the API key: every replica says the same
            return Response(
                refused[0]["body"], status_code=refused[0]["status"], media_type="application/json"
            )
        texts = [(r["replica"], r["body"].decode()) for r in answered]
        return PlainTextResponse(merge_metrics(texts), media_type="text/plain; version=0.0.4")

    @app.api_route("/{path:path}", methods=METHODS)
    async def forward(request: Request) -> Response:
        try:
            body = await read_body(request, config.max_body_bytes)
        except APIError as e:
            return _error(e)
        return await _forward(engines, _forwarded(request, body))

    return app


async def _forward(engines: Any, request: ForwardedRequest) -> Response:
    stream = engines.options(stream=True).handle.remote(request)
    try:
        start = await stream.__anext__()
    except Exception as e:  # the replica died or was unreachable before answering
        stream.cancel()
        logger.warning("engine replica lost before answering: %s", e)
        return _error(_lost(e))
    headers = [*start["headers"], (b"x-stencil-replica", start["replica"].encode())]
    sse = any(
        k.lower() == b"content-type" and v.startswith(b"text/event-stream")
        for k, v in start["headers"]
    )
    response = StreamingResponse(_rest(stream, sse), status_code=start["status"])
    response.raw_headers = headers  # the replica's, verbatim (content-length included)
    return response


async def _rest(stream: Any, sse: bool) -> AsyncIterator[bytes]:
    try:
        async for message in stream:
            yield message["body"]
    except Exception as e:  # lost mid-answer
        logger.warning("engine replica lost mid-stream: %s", e)
        if sse:
            yield f"data: {json.dumps(_lost(e).body())}\n\n".encode()
            yield b"data: [DONE]\n\n"
    finally:
        stream.cancel()  # the client went away, or the end: the replica stops generating


def _lost(e: BaseException) -> APIError:
    return APIError(
        f"the engine replica serving this request was lost ({type(e).__name__}); retry",
        status=503,
        type="server_error",
        code="replica_unavailable",
    )


def _error(error: APIError) -> Response:
    return JSONResponse(error.body(), status_code=error.status, headers=error.headers)


async def _broadcast(engines: Any, request: ForwardedRequest) -> list[Any]:
    """Every live replica's whole answer (a dict) or its exception."""
    try:
        response = engines.broadcast("call", request)
        return await response.results_async(timeout_s=BROADCAST_TIMEOUT_S, return_exceptions=True)
    except Exception as e:
        return [e]


def _health_entry(reply: Any) -> dict[str, Any]:
    if not isinstance(reply, dict):
        return {"replica": None, "status": "unreachable", "error": type(reply).__name__}
    try:
        status = json.loads(reply["body"]).get("status", "unavailable")
    except ValueError:
        status = "unavailable"
    if reply["status"] != 200 and status == "ok":
        status = "unavailable"
    return {"replica": reply["replica"], "pid": reply.get("pid"), "status": status}


def _forwarded(request: Request, body: bytes) -> ForwardedRequest:
    return ForwardedRequest(
        request.method,
        request.url.path,
        request.scope.get("query_string", b""),
        [(bytes(k), bytes(v)) for k, v in request.scope["headers"]],
        body,
        prompt_text(body),
    )


def prompt_text(body: bytes) -> str:
    """The start of a request's prompt (chat messages or a completion prompt), for routing."""
    try:
        data = json.loads(body) if body else None
    except ValueError:
        return ""
    if not isinstance(data, dict):
        return ""
    parts: list[str] = []
    messages = data.get("messages")
    if isinstance(messages, list):
        for m in messages:
            if isinstance(m, dict):
                parts.append(f"{m.get('role', '')}:{_content_text(m.get('content'))}\n")
    elif isinstance(data.get("prompt"), str | list):
        prompt = data["prompt"]
        parts.append(prompt if isinstance(prompt, str) else json.dumps(prompt[:1]))
    return "".join(parts)[:PREFIX_CHARS]


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def merge_metrics(texts: list[tuple[str, str]]) -> str:
    """Prometheus texts of several replicas as one: each family once (its HELP/TYPE lines, then
    every replica's samples), each sample labelled ``replica="ID"``."""
    families: dict[str, list[str]] = {}
    headers: dict[str, list[str]] = {}
    for replica, text in texts:
        family = ""
        for line in text.splitlines():
            if line.startswith("#"):
                words = line.split()
                if len(words) >= 3 and words[1] in ("HELP", "TYPE"):
                    family = words[2]
                    seen = headers.setdefault(family, [])
                    if line not in seen:
                        seen.append(line)
                    families.setdefault(family, [])
                continue
            if line.strip():
                families.setdefault(family, []).append(_labelled(line, replica))
    out: list[str] = []
    for family, samples in families.items():
        out += headers.get(family, [])
        out += samples
    return "\n".join(out) + "\n"


def _labelled(sample: str, replica: str) -> str:
    label = f'replica="{replica}"'
    name, brace, rest = sample.partition("{")
    if brace:
        return f"{name}{{{label},{rest}" if not rest.startswith("}") else f"{name}{{{label}{rest}"
    name, _, value = sample.partition(" ")
    return f"{name}{{{label}}} {value}"
