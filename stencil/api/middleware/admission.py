"""Admission control for graceful shutdown: count in-flight HTTP requests, and once draining
answer new ones 503 (``Retry-After``, ``Connection: close``) while those already admitted finish.

``/health`` stays reachable (it says 503 while draining, so a load balancer takes the instance out);
``/metrics`` too, so the drain can be watched.
"""

from __future__ import annotations

import asyncio
import time

from stencil.api.asgi import ASGIApp, Receive, Scope, Send, send_error
from stencil.api.errors import APIError

ALWAYS_ADMITTED = frozenset({"/health", "/metrics"})


class Admission:
    """Per-app counters; all methods run on the event loop."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.draining = False
        self.rejected = 0
        self._idle: asyncio.Event | None = None

    def enter(self) -> None:
        self.in_flight += 1

    def leave(self) -> None:
        self.in_flight -= 1
        if self.in_flight == 0 and self._idle is not None:
            self._idle.set()

    async def wait_idle(self, timeout: float) -> bool:
        """True once no request is in flight; False if ``timeout`` seconds pass first."""
        deadline = time.monotonic() + max(timeout, 0.0)
        while self.in_flight > 0:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._idle = asyncio.Event()
            if self.in_flight == 0:
                break
            try:
                await asyncio.wait_for(self._idle.wait(), left)
            except TimeoutError:
                return self.in_flight == 0
        return True


def shutting_down() -> APIError:
    return APIError(
        "the server is shutting down; retry on another instance",
        status=503,
        type="server_error",
        code="server_shutting_down",
        headers={"Retry-After": "5"},
    )


class AdmissionMiddleware:
    def __init__(self, app: ASGIApp, admission: Admission) -> None:
        self.app = app
        self.admission = admission

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.admission.draining and scope["path"] not in ALWAYS_ADMITTED:
            self.admission.rejected += 1
            await send_error(scope, send, shutting_down(), close=True)
            return
        self.admission.enter()
        try:
            await self.app(scope, receive, send)
        finally:
            self.admission.leave()
