"""Driving the engine for one HTTP request: start (errors before any byte is sent), stream the
cumulative ``RequestOutput``s, abort on early exit or shutdown. ``engine_stream`` turns them into the
per-choice events every response is rendered from."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from stencil.api.errors import APIError
from stencil.api.metrics import ServerMetrics
from stencil.constraints import ConstraintError, UnstatedValueError
from stencil.engine.errors import EngineError, QueueFullError
from stencil.engine.outputs import RequestOutput
from stencil.engine.serving_engine import ServingEngine

logger = logging.getLogger(__name__)


class EngineClient:
    """The app's handle on the engine: opens generations and aborts them off the request path."""

    def __init__(self, engine: ServingEngine, metrics: ServerMetrics) -> None:
        self.engine = engine
        self.metrics = metrics
        self._background: set[asyncio.Task[Any]] = set()
        self.open_generations: dict[str, Generation] = {}
        self.failure: APIError | None = None

    async def open(
        self, prompt_ids: list[int], params: Any, request_id: str, param: str | None = None
    ) -> Generation:
        """Start one engine request; ``param`` names the field a constraint error blames."""
        if self.failure is not None:
            raise self.failure
        gen = Generation(self, prompt_ids, params, request_id, param)
        try:
            await gen.start()
        except BaseException:
            gen.close()  # cancelled while queued, or rejected: make sure nothing stays scheduled
            raise
        return gen

    def fail_all(self, error: APIError) -> int:
        """End every open generation with ``error`` (and refuse new ones): the shutdown path.
        Returns how many were open."""
        self.failure = error
        gens = list(self.open_generations.values())
        for gen in gens:
            gen.fail(error)
        return len(gens)

    def abort_soon(self, request_id: str) -> None:
        """Abort without awaiting (safe inside a cancelled scope or a ``finally``)."""
        try:
            task = asyncio.get_running_loop().create_task(self._abort(request_id))
        except RuntimeError:
            return
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _abort(self, request_id: str) -> None:
        try:
            await self.engine.abort(request_id)
        except Exception:  # already finished or engine gone: nothing to free
            logger.debug("abort(%s) failed", request_id, exc_info=True)


class Generation:
    """One engine request. ``start`` fetches the first output so that bad input raises before
    the HTTP response begins; leaving the iteration early aborts the request."""

    def __init__(
        self, runner: EngineClient, prompt_ids: list[int], params: Any, rid: str, param: str | None
    ) -> None:
        self.runner = runner
        self.param = param
        self.request_id = rid
        self._agen = runner.engine.generate(prompt_ids, params, request_id=rid)
        self._first: RequestOutput | None = None
        self.finished = False
        self.closed = False
        self.failure: APIError | None = None
        runner.open_generations[rid] = self

    def fail(self, error: APIError) -> None:
        """End this generation with ``error``: its engine request is aborted, and the consumer
        gets ``error`` raised at its next output (for a stream: an error event)."""
        self.failure = error
        if not self.finished:
            self.runner.abort_soon(self.request_id)

    async def start(self) -> None:
        try:
            self._first = await self._agen.__anext__()
        except StopAsyncIteration:
            self._first = None
        except QueueFullError as e:
            raise APIError(
                str(e) or "the request queue is full",
                status=503,
                type="server_error",
                code="queue_full",
                headers={"Retry-After": "1"},
            ) from None
        except EngineError as e:
            raise APIError(
                f"the engine is not available: {e}",
                status=503,
                type="server_error",
                code="engine_unavailable",
            ) from None
        except ConstraintError as e:  # found by the compile (the translation is its first stage)
            where = f"invalid {self.param}: " if self.param else ""
            code = "unstated_value" if isinstance(e, UnstatedValueError) else None
            raise APIError(f"{where}{e}", status=400, param=self.param, code=code) from None
        except ValueError as e:  # RequestError
            raise APIError(str(e), status=400, param=_param_for(e)) from None
        if self.failure is not None:
            raise self.failure
        if self._first is not None and self._first.finished:
            self.finished = True

    async def __aiter__(self) -> AsyncIterator[RequestOutput]:
        try:
            if self._first is not None:
                yield self._first
            if self.finished or self._first is None:
                return
            async for out in self._agen:
                if self.failure is not None:
                    raise self.failure
                self.finished = out.finished
                yield out
                if out.finished:
                    return
        finally:
            self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.runner.open_generations.pop(self.request_id, None)
        if not self.finished:
            self.runner.abort_soon(self.request_id)


def _param_for(e: Exception) -> str | None:
    return "prompt" if "prompt" in str(e).lower() else None
