"""Driving the engine for one HTTP request: start (errors before any byte is sent), stream,
abort on early exit, and turn cumulative ``RequestOutput``s into per-choice events.

Events are what both the streaming (SSE) and the non-streaming responses are built from:
``Delta`` (new text + logprobs), ``ToolCalls`` (parsed calls) and ``Finish``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from stencil.api.errors import APIError
from stencil.api.metrics import ServerMetrics
from stencil.api.openai.convert import ModelInfo, Plan
from stencil.api.openai.tools import openai_calls
from stencil.constraints import ConstraintError
from stencil.engine.errors import EngineError, QueueFullError
from stencil.engine.outputs import CompletionOutput, PositionLogprobs, RequestOutput
from stencil.engine.serving_engine import ServingEngine

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class Delta:
    index: int
    text: str
    logprobs: list[PositionLogprobs] = field(default_factory=list)


@dataclass(slots=True)
class ToolCalls:
    index: int
    calls: list[dict[str, Any]]


@dataclass(slots=True)
class Finish:
    index: int
    reason: str
    num_tokens: int
    error: str | None = None


Event = Delta | ToolCalls | Finish


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
            raise APIError(f"{where}{e}", status=400, param=self.param) from None
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


# ---- events -----------------------------------------------------------------------------------


async def events(
    plan: Plan, gen: Generation, model: ModelInfo, offset: int = 0
) -> AsyncIterator[Event]:
    """Per-choice events for one plan; choice indices are shifted by ``offset``."""
    stream = _plain_events(gen) if plan.tools is None else _tool_events(plan, gen, model)
    async for ev in stream:
        if offset:
            ev.index += offset
        yield ev


async def _plain_events(gen: Generation) -> AsyncIterator[Event]:
    sent: dict[int, int] = {}
    lp_sent: dict[int, int] = {}
    done: set[int] = set()
    async for out in gen:
        for c in out.outputs:
            if c.index in done:
                continue
            if len(c.text) > sent.get(c.index, 0):
                start, lp_start = sent.get(c.index, 0), lp_sent.get(c.index, 0)
                yield Delta(c.index, c.text[start:], list((c.logprobs or [])[lp_start:]))
                sent[c.index], lp_sent[c.index] = len(c.text), len(c.logprobs or [])
            if c.finish_reason is not None:
                done.add(c.index)
                yield Finish(c.index, _reason(c), len(c.token_ids), c.error)


async def _tool_events(plan: Plan, gen: Generation, model: ModelInfo) -> AsyncIterator[Event]:
    """Tools in one constrained request: forced, the output is the calls; ``auto``, text is
    streamed until the family's trigger starts a call (``tool_formats``), which is held back
    and parsed when it is complete."""
    assert plan.tools is not None
    fmt, auto = plan.tool_format, plan.tools.mode == "auto"
    sent: dict[int, tuple[int, int]] = {}  # index -> (chars, logprobs) emitted
    started: set[int] = set()
    done: set[int] = set()
    async for out in gen:
        for c in out.outputs:
            if c.index in done:
                continue
            if auto and c.index not in started:
                safe, call = fmt.split(c.text)
                if call:
                    started.add(c.index)
                chars, lps = sent.get(c.index, (0, 0))
                if len(safe) > chars:
                    yield Delta(c.index, safe[chars:], list((c.logprobs or [])[lps:]))
                    sent[c.index] = (len(safe), len(c.logprobs or []))
            if c.finish_reason is not None:
                done.add(c.index)
                for ev in _finish_tools(plan, c, sent.get(c.index, (0, 0)), model):
                    yield ev


def _finish_tools(
    plan: Plan, c: CompletionOutput, sent: tuple[int, int], model: ModelInfo
) -> list[Event]:
    assert plan.tools is not None
    auto = plan.tools.mode == "auto"
    content, calls = plan.tool_format.parse(c.text, bare=not auto)
    chars, lps = sent
    out: list[Event] = []
    if calls is not None:
        if auto and len(content) > chars:
            out.append(Delta(c.index, content[chars:], list((c.logprobs or [])[lps:])))
        out += [
            ToolCalls(c.index, openai_calls(calls)),
            Finish(c.index, "tool_calls", len(c.token_ids)),
        ]
        return out
    if len(c.text) > chars:
        out.append(Delta(c.index, c.text[chars:], list((c.logprobs or [])[lps:])))
    reason = _reason(c)
    if auto and reason == "stop" and _at_budget(plan, c, model):
        reason = "length"  # free text cut by max_tokens (the text branch always "closes")
    return [*out, Finish(c.index, reason, len(c.token_ids), c.error)]


def _at_budget(plan: Plan, c: CompletionOutput, model: ModelInfo) -> bool:
    """Did the text end because max_tokens ran out (its last token is not an end token)?"""
    if not c.token_ids or len(c.token_ids) < (plan.params.max_tokens or 0):
        return False
    last = c.token_ids[-1]
    return last != c.stop_reason and model.tokenizer.decode([last], skip_special_tokens=True) != ""


def _reason(c: CompletionOutput) -> str:
    # a constrained output that is complete at max_tokens already says "stop" (close_on_length)
    return c.finish_reason or "stop"
