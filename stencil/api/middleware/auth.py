"""API-key authentication, decided in one place for every route.

With an API key configured, :class:`APIKeyMiddleware` checks ``Authorization: Bearer KEY``
(constant-time) on every request before routing, except on the exact paths listed public in
:data:`ROUTE_AUTH`. Deciding on the path before routing means no variant of a protected path
(trailing or double slash, other case, percent-encoding, another ``Host``) and no unknown path
reaches the app without the key. :data:`ROUTE_AUTH` names the decision for every route the app
has; ``create_app`` refuses to build an app with a route missing from it.

A browser (the playground page at ``/``) may give the key as HTTP Basic credentials instead (any
user name, the key as password): ``/`` answers 401 with a Basic challenge, so the browser asks
once and then sends the credentials with the page's own requests. They are refused on requests
another site made (``Sec-Fetch-Site`` other than ``same-origin`` / ``none``), so no other page
can ride on the credentials a browser keeps.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Iterable
from types import MappingProxyType
from typing import Any

from stencil.api.asgi import ASGIApp, Receive, Scope, Send, header, send_error
from stencil.api.errors import APIError

PUBLIC = "public"
KEY = "api-key"

# Every route of the app -> who may call it. A new route must be added here (create_app checks).
ROUTE_AUTH = MappingProxyType(
    {
        "/health": PUBLIC,
        "/v1/chat/completions": KEY,
        "/v1/completions": KEY,
        "/v1/embeddings": KEY,
        "/v1/responses": KEY,
        "/v1/responses/{response_id}": KEY,
        "/v1/models": KEY,
        "/version": KEY,
        "/metrics": KEY,
        "/tokenize": KEY,
        "/detokenize": KEY,
        "/openapi.json": KEY,
        "/docs": KEY,
        "/docs/oauth2-redirect": KEY,
        "/redoc": KEY,
        # the playground (stencil.playground, mounted by `stencil serve` unless --no-playground)
        "/": KEY,
        "/playground/{asset}": KEY,
        "/v1/playground/schemas": KEY,
        "/v1/playground/check": KEY,
        "/v1/playground/request": KEY,
        "/v1/playground/documents": KEY,
        "/v1/playground/spans": KEY,
        "/v1/playground/trace": KEY,
        "/v1/playground/facts": KEY,
    }
)
BASIC_CHALLENGE_PATHS = frozenset({"/"})  # where a browser is asked for the key
PUBLIC_PATHS = frozenset(p for p, who in ROUTE_AUTH.items() if who == PUBLIC)


def route_paths(routes: Iterable[Any], prefix: str = "") -> list[str]:
    """Every route path of an app (``app.routes``), through included routers and mounts; a
    route of unknown shape appears as ``?`` (so it counts as undecided)."""
    out: list[str] = []
    for route in routes:
        included = getattr(route, "original_router", None)  # FastAPI's included router
        if included is not None:
            context_prefix = getattr(getattr(route, "include_context", None), "prefix", "")
            out += route_paths(included.routes, prefix + context_prefix)
        elif hasattr(route, "routes") and hasattr(route, "path"):  # a Mount
            out += route_paths(route.routes, prefix + route.path)
        else:
            out.append(prefix + getattr(route, "path", "?"))
    return out


def undecided_routes(paths: Iterable[str]) -> list[str]:
    """The route paths that have no entry in :data:`ROUTE_AUTH`."""
    return sorted(p for p in set(paths) if p not in ROUTE_AUTH)


class APIKeyMiddleware:
    """401 for every request but those to :data:`PUBLIC_PATHS` unless it carries the key."""

    def __init__(self, app: ASGIApp, api_key: str | None) -> None:
        self.app = app
        self.expected = f"Bearer {api_key}".encode() if api_key else None
        self.key = api_key.encode() if api_key else b""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.expected is None or scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        given = header(scope, b"authorization")
        if (
            scope["path"] in PUBLIC_PATHS
            or hmac.compare_digest(given, self.expected)
            or self._basic_ok(scope, given)
        ):
            await self.app(scope, receive, send)
            return
        challenge = "Bearer"
        if scope["path"] in BASIC_CHALLENGE_PATHS:
            challenge = 'Basic realm="stencil", charset="UTF-8"'
        error = APIError(
            "invalid or missing API key (Authorization: Bearer KEY)",
            status=401,
            type="authentication_error",
            code="invalid_api_key",
            headers={"WWW-Authenticate": challenge},
        )
        await send_error(scope, send, error)

    def _basic_ok(self, scope: Scope, given: bytes) -> bool:
        """``Basic base64(user:KEY)`` from a same-origin (or non-browser) request."""
        site = header(scope, b"sec-fetch-site")
        if given[:6].lower() != b"basic " or site not in (b"", b"same-origin", b"none"):
            return False
        try:
            decoded = base64.b64decode(given[6:].strip(), validate=True)
        except (binascii.Error, ValueError):
            return False
        return hmac.compare_digest(decoded.partition(b":")[2], self.key)
