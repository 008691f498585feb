"""The HTTP routes: parsing, model check, disconnect handling, and the response paths."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from stencil.api.chat_render import Context, chat_response, completion_response, stream_chunks
from stencil.api.engine_stream import ChoiceState, EventStream
from stencil.api.errors import bad_request
from stencil.api.model_info import ModelInfo
from stencil.api.openai.chat_prompt import chat_prompt
from stencil.api.openai.convert import convert_chat, convert_completion
from stencil.api.openai.prompt_tokens import prompt_ids
from stencil.api.openai.protocol import (
    ChatCompletionRequest,
    CompletionRequest,
    DetokenizeRequest,
    TokenizeRequest,
)
from stencil.api.openapi import json_body
from stencil.api.read_request import read_request, ready
from stencil.api.send_response import respond
from stencil.api.state import AppState
from stencil.api.state import version as stencil_version


def _precheck(body: Any, st: AppState) -> None:
    """Sizes that are wrong whatever the items hold, answered before validating each item:
    more messages than the context has tokens, more logit_bias entries than the vocabulary."""
    if not isinstance(body, dict):
        return
    model = st.model
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


def _context(st: AppState, kind: str, plans: list, req: Any, logprobs: bool) -> Context:
    include_usage = bool(req.stream_options and req.stream_options.include_usage)
    return Context(kind, st.model_name, st.fingerprint, plans, req.n, include_usage, logprobs)


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
        st = ready(state)
        req = await read_request(request, st, ChatCompletionRequest, _precheck)
        ctx = _context(st, "chat", [convert_chat(req, st.model)], req, req.logprobs)
        return await _chat_like(request, st, ctx, req.stream, chat_response)

    @router.post("/v1/completions", openapi_extra=json_body(CompletionRequest))
    async def completions(request: Request) -> Response:
        st = ready(state)
        req = await read_request(request, st, CompletionRequest, _precheck)
        plans = convert_completion(req, st.model)
        ctx = _context(st, "completion", plans, req, req.logprobs is not None)
        return await _chat_like(request, st, ctx, req.stream, completion_response)

    @router.get("/v1/models")
    async def models() -> dict[str, Any]:
        st = ready(state)
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
        engine_metrics = {**engine_metrics, **state.responses.metrics()}
        text = state.metrics.render(engine_metrics, state.model_name or "loading")
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    @router.post("/tokenize", openapi_extra=json_body(TokenizeRequest))
    async def tokenize(request: Request) -> dict[str, Any]:
        st = ready(state)
        req = await read_request(request, st, TokenizeRequest)
        ids = _tokenize(req, st.model)
        return {"count": len(ids), "max_model_len": st.model.max_model_len, "tokens": ids}

    @router.post("/detokenize", openapi_extra=json_body(DetokenizeRequest))
    async def detokenize(request: Request) -> dict[str, Any]:
        st = ready(state)
        req = await read_request(request, st, DetokenizeRequest)
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
        return prompt_ids(
            model.tokenizer, req.prompt, model.max_model_len, "prompt", req.add_special_tokens
        )
    if not req.messages:
        raise bad_request("messages must not be empty", "messages")
    prompt = chat_prompt(
        req.messages,
        model,
        add_generation_prompt=req.add_generation_prompt,
        chat_template_kwargs=req.chat_template_kwargs,
    )
    return prompt.ids


async def _chat_like(
    request: Request,
    st: AppState,
    ctx: Context,
    streaming: bool,
    build: Callable[[Context, dict[int, ChoiceState]], dict[str, Any]],
) -> Response:
    """A chat or completion request: its events rendered as SSE chunks or one body."""
    opened = EventStream.open(st.runner, ctx.plans, ctx.id, ctx.n, st.model)
    return await respond(
        request,
        st,
        opened,
        streaming,
        lambda stream, on_exit: stream_chunks(stream, ctx, on_exit),
        lambda choices: build(ctx, choices),
        {"X-Request-Id": ctx.id},
    )
