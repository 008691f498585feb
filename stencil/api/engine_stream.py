"""One HTTP request's engine work as a single stream of events: every plan's generation opened
(bad input fails here, before any byte is sent), their events merged, the latency histograms fed,
and whatever is unfinished aborted on ``close``. Each plan's reply is read as plain text
(``output_events``) or through the tool parser (``tools.parser``); the renderers only read this
stream."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from stencil.api.engine_client import EngineClient, Generation
from stencil.api.errors import APIError
from stencil.api.metrics import ServerMetrics
from stencil.api.model_info import ModelInfo
from stencil.api.output_events import Delta, Event, Finish, ToolCalls, plain_events
from stencil.api.request_plan import Plan
from stencil.api.tools.parser import harmony_events, tool_events
from stencil.engine.outputs import PositionLogprobs


class Timing:
    """Feeds the server's latency histograms from the event stream of one request."""

    def __init__(self, metrics: ServerMetrics) -> None:
        self.metrics = metrics
        self.start = time.perf_counter()
        self.last: float | None = None

    def token(self) -> None:
        now = time.perf_counter()
        if self.last is None:
            self.metrics.ttft.observe(now - self.start)
        else:
            self.metrics.itl.observe(now - self.last)
        self.last = now

    def done(self, finishes: list[Finish]) -> None:
        self.metrics.e2e.observe(time.perf_counter() - self.start)
        for f in finishes:
            self.metrics.finished[f.reason] += 1


class EventStream:
    """The merged events of a request's plans (``n`` choices each; plan k's choices are
    numbered from ``k * n``). Iterate once; ``close`` aborts what has not finished."""

    def __init__(
        self, plans: list[Plan], gens: list[Generation], n: int, model: ModelInfo, timing: Timing
    ) -> None:
        self.plans, self.gens, self.n = plans, gens, n
        self.model = model
        self.timing = timing
        self.finishes: dict[int, Finish] = {}

    @classmethod
    async def open(
        cls, runner: EngineClient, plans: list[Plan], request_id: str, n: int, model: ModelInfo
    ) -> EventStream:
        """Start every plan's engine request; on any failure abort those already started."""
        timing = Timing(runner.metrics)
        gens: list[Generation] = []
        try:
            for k, plan in enumerate(plans):
                rid = f"{request_id}-{k}"
                gens.append(
                    await runner.open(plan.prompt_ids, plan.params, rid, plan.constraint_param)
                )
        except BaseException:
            for g in gens:
                g.close()
            raise
        return cls(plans, gens, n, model, timing)

    async def __aiter__(self) -> AsyncIterator[Event]:
        streams = [
            _events(plan, gen, self.model.tokenizer, offset=k * self.n)
            for k, (plan, gen) in enumerate(zip(self.plans, self.gens, strict=True))
        ]
        merged = streams[0] if len(streams) == 1 else _merge(streams)
        async for ev in merged:
            if isinstance(ev, Finish):
                self.finishes[ev.index] = ev
            else:
                self.timing.token()
            yield ev
        self.timing.done(list(self.finishes.values()))

    def close(self) -> None:
        for g in self.gens:
            g.close()


async def _events(plan: Plan, gen: Generation, tokenizer: Any, offset: int) -> AsyncIterator[Event]:
    """Per-choice events for one plan, read as its reply is written (harmony, a family's tool
    calls, or plain text); choice indices are shifted by ``offset``."""
    if plan.harmony:
        stream = harmony_events(gen)
    elif plan.tools is None:
        stream = plain_events(gen)
    else:
        stream = tool_events(gen, plan.tools, plan.params.max_tokens or 0, tokenizer)
    async for ev in stream:
        if offset:
            ev.index += offset
        yield ev


async def _merge(streams: list[AsyncIterator[Event]]) -> AsyncIterator[Event]:
    queue: asyncio.Queue[Any] = asyncio.Queue()
    end = object()

    async def pump(s: AsyncIterator[Event]) -> None:
        try:
            async for ev in s:
                await queue.put(ev)
        except Exception as e:  # surfaced to the consumer below
            await queue.put(e)
        finally:
            await queue.put(end)

    tasks = [asyncio.create_task(pump(s)) for s in streams]
    try:
        remaining = len(tasks)
        while remaining:
            item = await queue.get()
            if item is end:
                remaining -= 1
            elif isinstance(item, Exception):
                raise item
            else:
                yield item
    finally:
        for t in tasks:
            t.cancel()


# ---- accumulation (non-streaming) -------------------------------------------------------------


@dataclass(slots=True)
class ChoiceState:
    text: str = ""
    reasoning: str = ""
    logprobs: list[PositionLogprobs] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish: Finish | None = None


async def collect(stream: EventStream) -> dict[int, ChoiceState]:
    """Every choice's whole text, logprobs, calls and finish; a failed generation raises its
    ``Finish.api_error`` (a 400 when the request's constraint failed, else a 500)."""
    choices: dict[int, ChoiceState] = {}
    async for ev in stream:
        st = choices.setdefault(ev.index, ChoiceState())
        if isinstance(ev, Delta) and ev.reasoning:
            st.reasoning += ev.text
        elif isinstance(ev, Delta):
            st.text += ev.text
            st.logprobs += ev.logprobs
        elif isinstance(ev, ToolCalls):
            st.tool_calls += ev.calls
        else:
            st.finish = ev
    failed = [f for f in stream.finishes.values() if f.reason == "error"]
    if failed:
        raise failed[0].api_error()
    return choices


async def until_failure(
    stream: AsyncIterator[Event], failures: list[APIError]
) -> AsyncIterator[Event]:
    """``stream``'s events until it raises an APIError, which is appended to ``failures``
    (the server shutting down ends every open generation that way)."""
    try:
        async for ev in stream:
            yield ev
    except APIError as e:
        failures.append(e)
