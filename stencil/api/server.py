"""The OpenAI-compatible HTTP server: ``create_app(engine, config) -> FastAPI``.

No module-level state: everything lives on ``app.state.stencil`` so tests can build several apps
around injected engines. ``engine`` may also be a zero-argument factory; it then loads in a thread
after startup while ``/health`` answers 503.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from stencil.api.embeddings import embedding_routes
from stencil.api.protocol import APIError, bad_request
from stencil.api.routes import api_routes, public_routes
from stencil.api.state import AppState, ServerConfig, version

__all__ = ["AppState", "ServerConfig", "create_app"]

logger = logging.getLogger(__name__)


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

    app = FastAPI(title="Stencil", version=version(), lifespan=lifespan)
    app.state.stencil = state
    _install_error_handlers(app)
    app.include_router(public_routes(state))
    auth = [Depends(_auth(state.config))]
    app.include_router(api_routes(state), dependencies=auth)
    app.include_router(embedding_routes(state), dependencies=auth)
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
