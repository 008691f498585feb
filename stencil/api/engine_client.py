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
from stencil.api.openai.convert import ModelInfo, Plan, with_constraint
from stencil.api.openai.tools import TOOL_CALL_OPEN, parse_calls, split_tool_text
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
        except ConstraintError as e:  # found by the compile (translation deferred to it)
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
    plan: Plan, gen: Generation, runner: EngineClient, model: ModelInfo, offset: int = 0
) -> AsyncIterator[Event]:
    """Per-choice events for one plan; choice indices are shifted by ``offset``."""
    if plan.tools is not None and plan.tools.mode == "auto":
        stream = _auto_tool_events(plan, gen, runner, model)
    else:
        stream = _plain_events(plan, gen)
    async for ev in stream:
        if offset:
            ev.index += offset
        yield ev


async def _plain_events(plan: Plan, gen: Generation) -> AsyncIterator[Event]:
    forced = plan.tools is not None
    sent: dict[int, int] = {}
    lp_sent: dict[int, int] = {}
    done: set[int] = set()
    async for out in gen:
        for c in out.outputs:
            if c.index in done:
                continue
            if not forced and len(c.text) > sent.get(c.index, 0):
                start, lp_start = sent.get(c.index, 0), lp_sent.get(c.index, 0)
                yield Delta(c.index, c.text[start:], list((c.logprobs or [])[lp_start:]))
                sent[c.index], lp_sent[c.index] = len(c.text), len(c.logprobs or [])
            if c.finish_reason is not None:
                done.add(c.index)
                for ev in _finish(plan, c, forced, len(c.token_ids)):
                    yield ev


def _finish(plan: Plan, c: CompletionOutput, forced: bool, num_tokens: int) -> list[Event]:
    if forced:
        calls = parse_calls(c.text)
        if calls is not None:
            return [ToolCalls(c.index, calls), Finish(c.index, "tool_calls", num_tokens)]
        return [
            Delta(c.index, c.text, list(c.logprobs or [])),
            Finish(c.index, _reason(c), num_tokens, c.error),
        ]
    return [Finish(c.index, _reason(c), num_tokens, c.error)]


def _reason(c: CompletionOutput) -> str:
    # a constrained output that is complete at max_tokens already says "stop" (close_on_length)
    return c.finish_reason or "stop"


async def _auto_tool_events(
    plan: Plan, gen: Generation, runner: EngineClient, model: ModelInfo
) -> AsyncIterator[Event]:
    """``tool_choice: auto``: free text until the model writes ``<tool_call>``, then the call
    list is generated under the tools' constraint in a second request."""
    emitted, lp_emitted = 0, 0
    last: CompletionOutput | None = None
    started = False
    async for out in gen:
        last = out.outputs[0]
        safe, started = split_tool_text(last.text)
        if len(safe) > emitted:
            yield Delta(0, safe[emitted:], list((last.logprobs or [])[lp_emitted:]))
            emitted, lp_emitted = len(safe), len(last.logprobs or [])
        if started or last.finish_reason is not None:
            break
    gen.close()
    if last is None:
        yield Finish(0, "stop", 0)
        return
    if not started:
        if len(last.text) > emitted:
            yield Delta(0, last.text[emitted:], list((last.logprobs or [])[lp_emitted:]))
        yield Finish(0, _reason(last), len(last.token_ids), last.error)
        return
    async for ev in _constrained_call(plan, last, runner, model, gen.request_id):
        yield ev


async def _constrained_call(
    plan: Plan, first: CompletionOutput, runner: EngineClient, model: ModelInfo, rid: str
) -> AsyncIterator[Event]:
    used = len(first.token_ids)
    prefix = first.text[: first.text.find(TOOL_CALL_OPEN)] + TOOL_CALL_OPEN
    ids = plan.prompt_ids + model.tokenizer(prefix, add_special_tokens=False).input_ids
    budget = min((plan.params.max_tokens or 1) - used, model.max_model_len - len(ids))
    if budget < 1:
        yield Finish(0, "length", used)
        return
    assert plan.tool_constraint is not None
    params = with_constraint(plan.params, plan.tool_constraint, budget)
    gen = await runner.open(ids, params, f"{rid}-call", "tools")
    last: CompletionOutput | None = None
    async for out in gen:
        last = out.outputs[0]
    if last is None:
        yield Finish(0, "error", used, "no output for the tool call")
        return
    for ev in _finish(plan, last, True, used + len(last.token_ids)):
        yield ev
