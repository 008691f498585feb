"""The OpenAI-compatible HTTP server: ``create_app(engine, config) -> FastAPI``.

No module-level state: everything lives on ``app.state.stencil`` so tests can build several apps
around injected engines. ``engine`` may also be a zero-argument factory; it then loads in a thread
after startup while ``/health`` answers 503.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from stencil.api.embeddings import embedding_routes
from stencil.api.errors import APIError, bad_request
from stencil.api.middleware.admission import AdmissionMiddleware
from stencil.api.middleware.auth import APIKeyMiddleware, route_paths, undecided_routes
from stencil.api.middleware.header_limits import HeaderLimitMiddleware
from stencil.api.middleware.memory import TrimAfterLargeBodies
from stencil.api.openai.protocol import (
    ChatCompletionRequest,
    CompletionRequest,
    DetokenizeRequest,
    EmbeddingRequest,
    TokenizeRequest,
)
from stencil.api.openapi import install_openapi
from stencil.api.responses_api.protocol import ResponsesRequest
from stencil.api.responses_api.routes import responses_routes
from stencil.api.responses_api.store import ResponseStore
from stencil.api.routes import api_routes, public_routes
from stencil.api.state import AppState, ServerConfig, version
from stencil.engine.serving_engine import ServingEngine

__all__ = ["AppState", "ServerConfig", "create_app"]

logger = logging.getLogger(__name__)

REQUEST_MODELS = [
    ChatCompletionRequest,
    CompletionRequest,
    EmbeddingRequest,
    TokenizeRequest,
    DetokenizeRequest,
    ResponsesRequest,
]


def create_app(
    engine: ServingEngine | Callable[[], ServingEngine],
    config: ServerConfig | None = None,
    extra_routes: Sequence[Callable[[AppState], APIRouter]] = (),
) -> FastAPI:
    """Build the app around an engine (or a factory that builds one after startup).
    ``extra_routes``: routers built from the app state and mounted beside the API (the
    playground, which sits above this package: ``stencil.playground.playground_routes``)."""
    cfg = config or ServerConfig()
    store = ResponseStore(cfg.max_stored_responses, cfg.max_stored_response_bytes)
    state = AppState(cfg, responses=store)
    factory: Callable[[], ServingEngine] | None = None
    if callable(engine) and not hasattr(engine, "generate"):
        factory, state.owns_engine = engine, True
    else:
        state.attach(engine)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        loader = asyncio.create_task(_load(state, factory)) if factory else None
        yield
        if loader is not None:
            loader.cancel()
        if state.owns_engine and state.engine is not None:
            await asyncio.to_thread(state.engine.shutdown)

    app = FastAPI(title="Stencil", version=version(), lifespan=lifespan)
    app.state.stencil = state
    _install_error_handlers(app)
    app.include_router(public_routes(state))
    app.include_router(api_routes(state))
    app.include_router(embedding_routes(state))
    app.include_router(responses_routes(state))
    for routes in extra_routes:
        app.include_router(routes(state))
    install_openapi(app, REQUEST_MODELS, lambda: state.model_name)
    undecided = undecided_routes(route_paths(app.routes))
    if undecided:
        raise RuntimeError(f"routes without an auth decision in auth.ROUTE_AUTH: {undecided}")
    # outermost first: header limits, then the API key, then admission (drain)
    app.add_middleware(TrimAfterLargeBodies)
    app.add_middleware(AdmissionMiddleware, admission=state.admission)
    app.add_middleware(APIKeyMiddleware, api_key=cfg.api_key)
    app.add_middleware(
        HeaderLimitMiddleware, max_headers=cfg.max_headers, max_header_bytes=cfg.max_header_bytes
    )
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


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(APIError)
    async def api_error(_: Request, e: APIError) -> JSONResponse:
        return JSONResponse(e.body(), status_code=e.status, headers=e.headers)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, e: RequestValidationError) -> JSONResponse:
        problems = [f"{'.'.join(map(str, x.get('loc', ())))}: {x.get('msg')}" for x in e.errors()]
        err = bad_request(f"invalid request: {'; '.join(problems[:3])}")  # 422 -> 400
        return JSONResponse(err.body(), status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, e: StarletteHTTPException) -> JSONResponse:
        kind = "not_found_error" if e.status_code == 404 else "invalid_request_error"
        err = APIError(str(e.detail), status=e.status_code, type=kind)
        return JSONResponse(err.body(), status_code=e.status_code, headers=e.headers)

    @app.exception_handler(Exception)
    async def internal(_: Request, e: Exception) -> JSONResponse:
        ref = uuid.uuid4().hex[:12]
        logger.exception("internal error %s", ref)  # the details stay in the log
        err = APIError(
            f"internal error ({type(e).__name__}, ref {ref}); see the server log",
            status=500,
            type="server_error",
        )
        return JSONResponse(err.body(), status_code=500)
