"""Running the app under uvicorn: header limits at the HTTP parser, and graceful shutdown.

:class:`StencilServer` turns SIGTERM (and SIGINT) into a drain instead of an immediate stop:
admission closes (new requests get 503, ``/health`` says ``draining``), in-flight requests get
``ServerConfig.shutdown_timeout`` seconds to finish, those still running then end with an error
(a 503 body, or an error event on a stream), and the process exits 0 after the lifespan shuts the
engine down. A second signal during the drain stops at once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
from types import FrameType
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from stencil.api.middleware.admission import shutting_down
from stencil.api.middleware.header_limits import parser_buffer_bytes, too_large
from stencil.api.state import AppState, ServerConfig

logger = logging.getLogger(__name__)

FORCE_EXIT_GRACE = 5.0  # seconds for requests ended with an error to send it, after the timeout


class _Connection(h11.Connection):
    """Remembers the status h11 suggests for the last protocol error (431 for a head too big)."""

    error_status = 400

    def next_event(self) -> Any:
        try:
            return super().next_event()
        except h11.RemoteProtocolError as e:
            self.error_status = e.error_status_hint
            raise


class LimitedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol answering 431 (not 400) to a request head over the parser buffer."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.conn = _Connection(h11.SERVER, self.config.h11_max_incomplete_event_size)

    def send_400_response(self, msg: str) -> None:
        if self.conn.error_status != 431:
            super().send_400_response(msg)
            return
        limit = self.config.h11_max_incomplete_event_size
        body = json.dumps(too_large(f"the request head exceeds {limit} bytes").body()).encode()
        headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
        for event in (
            h11.Response(
                status_code=431, headers=headers, reason=b"Request Header Fields Too Large"
            ),
            h11.Data(data=body),
            h11.EndOfMessage(),
        ):
            self.transport.write(self.conn.send(event))
        self.transport.close()


def uvicorn_config(app: Any, settings: ServerConfig) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        lifespan="on",
        http=LimitedH11Protocol,
        h11_max_incomplete_event_size=parser_buffer_bytes(settings.max_header_bytes),
        timeout_graceful_shutdown=int(FORCE_EXIT_GRACE),
    )


class StencilServer(uvicorn.Server):
    """uvicorn's server with a drain on SIGTERM / SIGINT (see the module docstring)."""

    def __init__(self, app: Any, settings: ServerConfig) -> None:
        super().__init__(uvicorn_config(app, settings))
        self.state: AppState = app.state.stencil
        self.shutdown_timeout = settings.shutdown_timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._drain: asyncio.Task[None] | None = None
        self._signalled = False

    async def serve(self, sockets: Any = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:  # noqa: ARG002 (uvicorn's)
        # not recorded in _captured_signals: uvicorn would re-raise it at exit (status -15)
        if self._signalled or self.should_exit or self._loop is None:
            self.force_exit = self.should_exit = True  # a second signal: stop now
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self.state.runner_fail_all, shutting_down())
            return
        self._signalled = True
        logger.info("%s: draining", signal.Signals(sig).name)
        self.begin_drain()

    def begin_drain(self) -> None:
        """Start the drain (thread-safe; what SIGTERM does)."""
        assert self._loop is not None, "the server is not running"
        self._loop.call_soon_threadsafe(self._start_drain)

    def _start_drain(self) -> None:
        if self._drain is None:
            self._drain = asyncio.get_running_loop().create_task(self._run_drain())

    async def _run_drain(self) -> None:
        try:
            await drain(self.state, self.shutdown_timeout)
        finally:
            self.should_exit = True


async def drain(state: AppState, timeout: float, grace: float = FORCE_EXIT_GRACE) -> None:
    """Close admission, wait up to ``timeout`` s for in-flight requests, then end the rest."""
    admission = state.admission
    admission.draining = True
    logger.info("draining %d in-flight request(s), up to %.1f s", admission.in_flight, timeout)
    if await admission.wait_idle(timeout):
        return
    ended = state.runner_fail_all(shutting_down())
    logger.warning("shutdown timeout: %d generation(s) end with an error", ended)
    if not await admission.wait_idle(grace):
        logger.warning("%d request(s) still open after the grace period", admission.in_flight)
