"""Reading one HTTP request and guarding its lifetime: the engine's readiness, the body (size-
bounded JSON, no lone surrogates), strict parsing into a request model, the model name, and
cancelling the work when the client disconnects."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from fastapi import Request
from pydantic import BaseModel, ValidationError

from stencil.api.errors import APIError, bad_request
from stencil.api.openai.validation import describe_validation_error
from stencil.api.state import AppState
from stencil.api.surrogates import lone_surrogate_path

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


def ready(state: AppState) -> AppState:
    """The state, once the engine is loaded; else a 503 (loading, or the load error)."""
    if state.engine is None:
        msg = (
            f"the model failed to load: {state.load_error}"
            if state.load_error
            else "the model is still loading"
        )
        raise APIError(
            msg, status=503, type="server_error", code="model_loading", headers={"Retry-After": "5"}
        )
    return state


async def read_body(request: Request, limit: int) -> bytes:
    """The raw body, read up to ``limit`` bytes (413 beyond, even without Content-Length)."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    parts, size = [], 0
    async for part in request.stream():
        size += len(part)
        if size > limit:
            raise _too_large(limit)
        parts.append(part)
    return b"".join(parts)


def _too_large(limit: int) -> APIError:
    return APIError(f"request body exceeds {limit} bytes", status=413, code="request_too_large")


async def json_body(request: Request, state: AppState) -> Any:
    """The JSON body, read up to ``max_body_bytes``."""
    raw = await read_body(request, state.config.max_body_bytes)
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError) as e:  # JSONDecodeError and UnicodeDecodeError too
        raise bad_request(f"the request body is not valid JSON: {e}") from None
    where = lone_surrogate_path(raw, doc)
    if where is not None:
        raise bad_request(f"{where} holds a lone UTF-16 surrogate (not valid Unicode text)", where)
    return doc


def parse(cls: type[M], body: Any) -> M:
    """``body`` validated as ``cls``; a 400 naming the first bad field."""
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    try:
        return cls.model_validate(body)
    except ValidationError as e:
        message, param = describe_validation_error(e)
        raise bad_request(message, param) from None


def check_model(name: str | None, state: AppState) -> None:
    """A 404 unless ``name`` is the served model (or omitted)."""
    if name is None or name in (state.model_name, str(state.engine.model_name)):
        return
    raise APIError(
        f"the model `{name}` does not exist; this server serves `{state.model_name}`",
        status=404,
        type="invalid_request_error",
        param="model",
        code="model_not_found",
    )


async def read_request(
    request: Request,
    state: AppState,
    cls: type[M],
    precheck: Callable[[Any, AppState], None] | None = None,
) -> M:
    """The body read as JSON, optionally prechecked raw, parsed as ``cls``, its model checked."""
    body = await json_body(request, state)
    if precheck is not None:
        precheck(body, state)
    req = parse(cls, body)
    check_model(req.model, state)
    return req


async def _wait_disconnect(request: Request) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


class ClientGone(Exception):
    """The client disconnected before the response was ready."""


async def unless_disconnected(request: Request, state: AppState, coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` but cancel it (aborting its engine requests) if the client goes away."""
    work = asyncio.ensure_future(coro)
    watch = asyncio.ensure_future(_wait_disconnect(request))
    try:
        await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
    if work.done():
        return work.result()
    work.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await work
    state.metrics.aborted_by_client += 1
    raise ClientGone()
