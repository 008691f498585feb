"""The HTTP routes: parsing, model check, disconnect handling, and the response paths."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from pydantic import BaseModel, ValidationError

from stencil.api.errors import APIError, bad_request
from stencil.api.openai.convert import (
    ModelInfo,
    convert_chat,
    convert_completion,
    prompt_ids,
)
from stencil.api.openai.messages import render_chat
from stencil.api.openai.protocol import (
    ChatCompletionRequest,
    CompletionRequest,
    DetokenizeRequest,
    TokenizeRequest,
)
from stencil.api.openai.validation import describe_validation_error
from stencil.api.openapi import json_body
from stencil.api.responses import (
    Context,
    Timing,
    all_events,
    chat_response,
    collect,
    completion_response,
    open_all,
    stream_chunks,
)
from stencil.api.state import AppState
from stencil.api.state import version as stencil_version
from stencil.api.surrogates import lone_surrogate_path

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


def _ready(state: AppState) -> AppState:
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
    too_large = APIError(
        f"request body exceeds {limit} bytes", status=413, code="request_too_large"
    )
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise too_large
    parts, size = [], 0
    async for part in request.stream():
        size += len(part)
        if size > limit:
            raise too_large
        parts.append(part)
    return b"".join(parts)


async def _body(request: Request, state: AppState) -> Any:
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


def _parse(cls: type[M], body: Any) -> M:
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    try:
        return cls.model_validate(body)
    except ValidationError as e:
        message, param = describe_validation_error(e)
        raise bad_request(message, param) from None


def _precheck(body: Any, model: ModelInfo) -> None:
    """Sizes that are wrong whatever the items hold, answered before validating each item:
    more messages than the context has tokens, more logit_bias entries than the vocabulary."""
    if not isinstance(body, dict):
        return
    messages, bias = body.get("messages"), body.get("logit_bias")
    if isinstance(messages, list) and len(messages) > model.max_model_len:
        raise bad_request(
            f"{len(messages)} messages cannot fit in this model's context of "
            f"{model.max_model_len} tokens",
            "messages",
        )
    if isinstance(bias, dict) and len(bias) > model.vocab_size:
        raise bad_request(
            f"logit_bias has {len(bias)} entries; the vocabulary has {model.vocab_size} tokens",
            "logit_bias",
        )


def _check_model(name: str | None, state: AppState) -> None:
    if name is None or name in (state.model_name, str(state.engine.model_name)):
        return
    raise APIError(
        f"the model `{name}` does not exist; this server serves `{state.model_name}`",
        status=404,
        type="invalid_request_error",
        param="model",
        code="model_not_found",
    )


async def _wait_disconnect(request: Request) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


class ClientGone(Exception):
    """The client disconnected before the response was ready."""


async def _unless_disconnected(
    request: Request, state: AppState, coro: Coroutine[Any, Any, T]
) -> T:
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


# ---- routes -----------------------------------------------------------------------------------


def public_routes(state: AppState) -> APIRouter:
    router = APIRouter()

    @router.get("/health")
    async def health() -> Response:
        if state.admission.draining:
            return JSONResponse({"status": "draining"}, status_code=503)
        ok = state.engine is not None and bool(state.engine.is_healthy())
        return JSONResponse(
            {"status": "ok" if ok else "unavailable"}, status_code=200 if ok else 503
        )

    return router


def api_routes(state: AppState) -> APIRouter:
    router = APIRouter()

    @router.post("/v1/chat/completions", openapi_extra=json_body(ChatCompletionRequest))
    async def chat(request: Request) -> Response:
        st = _ready(state)
        body = await _body(request, st)
        _precheck(body, st.model)
        req = _parse(ChatCompletionRequest, body)
        _check_model(req.model, st)
        plan = convert_chat(req, st.model)
        include_usage = bool(req.stream_options and req.stream_options.include_usage)
        ctx = Context(
            "chat",
            st.model_name,
            st.fingerprint,
            [plan],
            req.n,
            req.stream,
            include_usage,
            req.logprobs,
        )
        return await _respond(request, st, ctx, chat_response)

    @router.post("/v1/completions", openapi_extra=json_body(CompletionRequest))
    async def completions(request: Request) -> Response:
        st = _ready(state)
        body = await _body(request, st)
        _precheck(body, st.model)
        req = _parse(CompletionRequest, body)
        _check_model(req.model, st)
        plans = convert_completion(req, st.model)
        include_usage = bool(req.stream_options and req.stream_options.include_usage)
        ctx = Context(
            "completion",
            st.model_name,
            st.fingerprint,
            plans,
            req.n,
            req.stream,
            include_usage,
            req.logprobs is not None,
        )
        return await _respond(request, st, ctx, completion_response)

    @router.get("/v1/models")
    async def models() -> dict[str, Any]:
        st = _ready(state)
        card = {
            "id": st.model_name,
            "object": "model",
            "created": st.created,
            "owned_by": "stencil",
            "root": str(st.engine.model_name),
            "max_model_len": st.model.max_model_len,
        }
        return {"object": "list", "data": [card]}

    @router.get("/version")
    async def version() -> dict[str, str]:
        return {"version": stencil_version()}

    @router.get("/metrics")
    async def metrics() -> Response:
        engine_metrics = state.engine.get_metrics() if state.engine is not None else {}
        text = state.metrics.render(engine_metrics, state.model_name or "loading")
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    @router.post("/tokenize", openapi_extra=json_body(TokenizeRequest))
    async def tokenize(request: Request) -> dict[str, Any]:
        st = _ready(state)
        req = _parse(TokenizeRequest, await _body(request, st))
        _check_model(req.model, st)
        ids = _tokenize(req, st.model)
        return {"count": len(ids), "max_model_len": st.model.max_model_len, "tokens": ids}

    @router.post("/detokenize", openapi_extra=json_body(DetokenizeRequest))
    async def detokenize(request: Request) -> dict[str, Any]:
        st = _ready(state)
        req = _parse(DetokenizeRequest, await _body(request, st))
        _check_model(req.model, st)
        bad = [t for t in req.tokens if not 0 <= t < st.model.vocab_size]
        if bad:
            raise bad_request(f"token ids {bad[:5]} are outside the vocabulary", "tokens")
        return {"prompt": st.model.tokenizer.decode(req.tokens)}

    return router


def _tokenize(req: TokenizeRequest, model: ModelInfo) -> list[int]:
    """Token ids of the prompt or the rendered messages; longer than the context is a 400."""
    if (req.prompt is None) == (req.messages is None):
        raise bad_request("give exactly one of prompt and messages", "prompt")
    if req.prompt is not None:
        return prompt_ids(model, req.prompt, "prompt", req.add_special_tokens)
    chat = _parse(
        ChatCompletionRequest,
        {
            "messages": req.messages,
            "add_generation_prompt": req.add_generation_prompt,
            "chat_template_kwargs": req.chat_template_kwargs,
        },
    )
    text = render_chat(chat, model.tokenizer, None, model.max_model_len, model.call_format)
    return prompt_ids(model, text, "messages")


async def _respond(
    request: Request, st: AppState, ctx: Context, build: Callable[..., dict[str, Any]]
) -> Response:
    runner = st.runner
    timing = Timing(runner)
    try:
        gens = await _unless_disconnected(request, st, open_all(runner, ctx))
    except ClientGone:
        return Response(status_code=499)
    stream = all_events(ctx, gens, st.model)

    def close_all(completed: bool = True) -> None:
        if not completed:
            st.metrics.aborted_by_client += 1
        for g in gens:
            g.close()

    if ctx.stream:
        chunks = stream_chunks(stream, ctx, timing, close_all)
        return StreamingResponse(
            chunks,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Request-Id": ctx.id},
        )
    try:
        choices = await _unless_disconnected(request, st, collect(stream, timing))
    except ClientGone:
        return Response(status_code=499)
    finally:
        close_all()
    return JSONResponse(build(ctx, choices))
