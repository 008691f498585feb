"""Request header limits: too many header fields or too many header bytes -> 431.

Two layers give the same answer. :class:`HeaderLimitMiddleware` counts the parsed headers of
every request (``ServerConfig.max_headers`` fields, ``max_header_bytes`` of names and values).
A header block so large that the HTTP parser stops buffering it (``parser_buffer_bytes``) never
reaches the app; ``http_server.LimitedH11Protocol`` answers that one with 431 as well.
"""

from __future__ import annotations

from stencil.api.asgi import ASGIApp, Receive, Scope, Send, send_error
from stencil.api.errors import APIError

REQUEST_LINE_ALLOWANCE = 8192  # the request line (method, target) beside the header fields


def parser_buffer_bytes(max_header_bytes: int) -> int:
    """How much of a request head the HTTP parser buffers before answering 431 itself: enough
    for ``max_header_bytes`` of fields plus their line syntax and a request line."""
    return 2 * max_header_bytes + REQUEST_LINE_ALLOWANCE


def too_large(detail: str) -> APIError:
    return APIError(
        f"request header fields too large: {detail}",
        status=431,
        code="request_header_fields_too_large",
    )


class HeaderLimitMiddleware:
    def __init__(self, app: ASGIApp, max_headers: int, max_header_bytes: int) -> None:
        self.app = app
        self.max_headers = max_headers
        self.max_header_bytes = max_header_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            headers = scope.get("headers", ())
            size = sum(len(k) + len(v) for k, v in headers)
            if len(headers) > self.max_headers:
                detail = f"{len(headers)} header fields (the limit is {self.max_headers})"
                await send_error(scope, send, too_large(detail), close=True)
                return
            if size > self.max_header_bytes:
                detail = f"{size} bytes of header fields (the limit is {self.max_header_bytes})"
                await send_error(scope, send, too_large(detail), close=True)
                return
        await self.app(scope, receive, send)
