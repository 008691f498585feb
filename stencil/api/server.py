"""The OpenAI-compatible HTTP server: ``create_app(engine, config) -> FastAPI``.

No module-level state: everything lives on ``app.state.stencil`` so tests can build several apps
around injected engines. ``engine`` may also be a zero-argument factory; it then loads in a thread
after startup while ``/health`` answers 503.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from stencil.api.convert import ModelInfo, convert_chat, convert_completion, render_chat
from stencil.api.metrics import ServerMetrics
from stencil.api.protocol import (
    APIError,
    ChatCompletionRequest,
    CompletionRequest,
    DetokenizeRequest,
    TokenizeRequest,
    bad_request,
)
from stencil.api.serving import (
    Context,
    Timing,
    all_events,
    chat_response,
    collect,
    completion_response,
    open_all,
    stream_chunks,
)
from stencil.api.validation import describe_validation_error
from stencil.engine.errors import ConfigError

logger = logging.getLogger(__name__)
T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


@dataclass(slots=True)
class ServerConfig:
    """How the HTTP server runs (the engine has its own ``EngineConfig``)."""

    host: str = "127.0.0.1"
    port: int = 8000
    api_key: str | None = None
    served_model_name: str | None = None
    max_body_bytes: int = 16 << 20
    log_level: str = "info"

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port must be in [0, 65535], got {self.port}")
        if self.max_body_bytes <= 0:
            raise ConfigError("max_body_bytes must be > 0")
        if self.api_key is not None and not self.api_key:
            raise ConfigError("api_key must not be empty")


@dataclass(slots=True)
class AppState:
    config: ServerConfig
    metrics: ServerMetrics = field(default_factory=ServerMetrics)
    engine: Any = None
    runner: Any = None
    model: ModelInfo | None = None
    model_name: str = ""
    fingerprint: str = ""
    load_error: str | None = None
    owns_engine: bool = False
    created: int = field(default_factory=lambda: int(time.time()))

    def attach(self, engine: Any) -> None:
        from stencil.api.generation import EngineRunner

        self.engine = engine
        self.runner = EngineRunner(engine, self.metrics)
        self.model = ModelInfo(engine.tokenizer, int(engine.max_model_len), int(engine.vocab_size))
        self.model_name = self.config.served_model_name or str(engine.model_name)
        digest = hashlib.sha1(f"{engine.model_name}:{_version()}".encode()).hexdigest()
        self.fingerprint = f"fp_stencil_{digest[:10]}"


def create_app(engine: Any, config: ServerConfig | None = None) -> FastAPI:
    """Build the app around an engine (or a factory that builds one after startup)."""
    state = AppState(config or ServerConfig())
    factory: Callable[[], Any] | None = None
    if callable(engine) and not hasattr(engine, "generate"):
        factory, state.owns_engine = engine, True
    else:
        state.attach(engine)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        loader = asyncio.create_task(_load(state, factory)) if factory else None
        yield
        if loader is not None:
            loader.cancel()
        if state.owns_engine and state.engine is not None:
            await asyncio.to_thread(state.engine.shutdown)

    app = FastAPI(title="Stencil", version=_version(), lifespan=lifespan)
    app.state.stencil = state
    _install_error_handlers(app)
    app.include_router(_public_routes(state))
    app.include_router(_api_routes(state), dependencies=[Depends(_auth(state.config))])
    return app


async def _load(state: AppState, factory: Callable[[], Any]) -> None:
    try:
        engine = await asyncio.to_thread(factory)
    except Exception as e:
        logger.exception("the engine failed to load")
        state.load_error = str(e)
        return
    state.attach(engine)
    logger.info("model %s loaded", state.model_name)


# ---- plumbing ---------------------------------------------------------------------------------


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("stencil-serve")
    except PackageNotFoundError:
        return "0.0.0"


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(APIError)
    async def api_error(_: Request, e: APIError) -> JSONResponse:
        return JSONResponse(e.body(), status_code=e.status, headers=e.headers)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, e: RequestValidationError) -> JSONResponse:
        err = bad_request(f"invalid request: {e.errors()[:3]}")  # 422 -> 400, OpenAI style
        return JSONResponse(err.body(), status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, e: StarletteHTTPException) -> JSONResponse:
        kind = "not_found_error" if e.status_code == 404 else "invalid_request_error"
        err = APIError(str(e.detail), status=e.status_code, type=kind)
        return JSONResponse(err.body(), status_code=e.status_code, headers=e.headers)

    @app.exception_handler(Exception)
    async def internal(_: Request, e: Exception) -> JSONResponse:
        logger.exception("internal error")
        err = APIError(f"internal error: {type(e).__name__}: {e}", status=500, type="server_error")
        return JSONResponse(err.body(), status_code=500)


def _auth(config: ServerConfig) -> Callable[[Request], Coroutine[Any, Any, None]]:
    expected = f"Bearer {config.api_key}".encode() if config.api_key else None

    async def check(request: Request) -> None:
        if expected is None:
            return
        given = request.headers.get("authorization", "").encode()
        if not hmac.compare_digest(given, expected):
            raise APIError(
                "invalid or missing API key (Authorization: Bearer KEY)",
                status=401,
                type="authentication_error",
                code="invalid_api_key",
            )

    return check


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


async def _body(request: Request, state: AppState) -> Any:
    limit = state.config.max_body_bytes
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise APIError(f"request body exceeds {limit} bytes", status=413, code="request_too_large")
    raw = await request.body()
    if len(raw) > limit:
        raise APIError(f"request body exceeds {limit} bytes", status=413, code="request_too_large")
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise bad_request(f"the request body is not valid JSON: {e}") from None


def _parse(cls: type[M], body: Any) -> M:
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    try:
        return cls.model_validate(body)
    except ValidationError as e:
        message, param = describe_validation_error(e)
        raise bad_request(message, param) from None


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


def _public_routes(state: AppState) -> APIRouter:
    router = APIRouter()

    @router.get("/health")
    async def health() -> Response:
        ok = state.engine is not None and bool(state.engine.is_healthy())
        return JSONResponse(
            {"status": "ok" if ok else "unavailable"}, status_code=200 if ok else 503
        )

    return router


def _api_routes(state: AppState) -> APIRouter:
    router = APIRouter()

    @router.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        st = _ready(state)
        req = _parse(ChatCompletionRequest, await _body(request, st))
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

    @router.post("/v1/completions")
    async def completions(request: Request) -> Response:
        st = _ready(state)
        req = _parse(CompletionRequest, await _body(request, st))
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
        return {"version": _version()}

    @router.get("/metrics")
    async def metrics() -> Response:
        engine_metrics = state.engine.get_metrics() if state.engine is not None else {}
        text = state.metrics.render(engine_metrics, state.model_name or "loading")
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    @router.post("/tokenize")
    async def tokenize(request: Request) -> dict[str, Any]:
        st = _ready(state)
        req = _parse(TokenizeRequest, await _body(request, st))
        _check_model(req.model, st)
        ids = _tokenize(req, st.model)
        return {"count": len(ids), "max_model_len": st.model.max_model_len, "tokens": ids}

    @router.post("/detokenize")
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
    if (req.prompt is None) == (req.messages is None):
        raise bad_request("give exactly one of prompt and messages", "prompt")
    if req.prompt is not None:
        return model.tokenizer(req.prompt, add_special_tokens=req.add_special_tokens).input_ids
    chat = ChatCompletionRequest(
        messages=req.messages,
        add_generation_prompt=req.add_generation_prompt,
        chat_template_kwargs=req.chat_template_kwargs,
    )
    text = render_chat(chat, model.tokenizer, None)
    return model.tokenizer(text, add_special_tokens=False).input_ids


async def _respond(
    request: Request, st: AppState, ctx: Context, build: Callable[..., dict[str, Any]]
) -> Response:
    runner = st.runner
    timing = Timing(runner)
    try:
        gens = await _unless_disconnected(request, st, open_all(runner, ctx))
    except ClientGone:
        return Response(status_code=499)
    stream = all_events(runner, ctx, gens, st.model)

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
        choices = await _unless_disconnected(request, st, collect(stream, ctx, timing))
    except ClientGone:
        return Response(status_code=499)
    finally:
        close_all()
    return JSONResponse(build(ctx, choices))
