"""Chat and completion responses, streaming (SSE) and not, built from generation events."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from stencil.api.engine_client import (
    Delta,
    EngineClient,
    Event,
    Finish,
    Generation,
    ToolCalls,
    events,
)
from stencil.api.errors import APIError
from stencil.api.openai.convert import ModelInfo, Plan
from stencil.engine.outputs import PositionLogprobs

_MIN_LOGPROB = -9999.0


@dataclass(slots=True)
class Context:
    """Per-request facts every response carries."""

    kind: str  # "chat" | "completion"
    model_name: str
    fingerprint: str
    plans: list[Plan]
    n: int
    stream: bool = False
    include_usage: bool = False
    logprobs: bool = False
    id: str = ""
    created: int = field(default_factory=lambda: int(time.time()))

    def __post_init__(self) -> None:
        if not self.id:
            prefix = "chatcmpl" if self.kind == "chat" else "cmpl"
            self.id = f"{prefix}-{uuid.uuid4().hex}"


async def open_all(runner: EngineClient, ctx: Context) -> list[Generation]:
    """Start every plan's engine request; on any failure abort those already started."""
    gens: list[Generation] = []
    try:
        for k, plan in enumerate(ctx.plans):
            rid = f"{ctx.id}-{k}"
            gens.append(await runner.open(plan.prompt_ids, plan.params, rid, plan.constraint_param))
    except BaseException:
        for g in gens:
            g.close()
        raise
    return gens


async def all_events(
    ctx: Context, gens: list[Generation], model: ModelInfo
) -> AsyncIterator[Event]:
    streams = [
        events(plan, gen, model, offset=k * ctx.n)
        for k, (plan, gen) in enumerate(zip(ctx.plans, gens, strict=True))
    ]
    if len(streams) == 1:
        async for ev in streams[0]:
            yield ev
        return
    async for ev in _merge(streams):
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
    logprobs: list[PositionLogprobs] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish: Finish | None = None


class Timing:
    """Feeds the server's latency histograms from the event stream of one request."""

    def __init__(self, runner: EngineClient) -> None:
        self.metrics = runner.metrics
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


async def collect(stream: AsyncIterator[Event], timing: Timing) -> dict[int, ChoiceState]:
    choices: dict[int, ChoiceState] = {}
    async for ev in stream:
        st = choices.setdefault(ev.index, ChoiceState())
        if isinstance(ev, Delta):
            timing.token()
            st.text += ev.text
            st.logprobs += ev.logprobs
        elif isinstance(ev, ToolCalls):
            timing.token()
            st.tool_calls += ev.calls
        else:
            st.finish = ev
    finishes = [c.finish for c in choices.values() if c.finish]
    timing.done(finishes)
    errors = [f.error or "generation failed" for f in finishes if f.reason == "error"]
    if errors:
        raise APIError(errors[0], status=500, type="server_error", code="generation_error")
    return choices


def usage(ctx: Context, choices: dict[int, ChoiceState], cached: int = 0) -> dict[str, Any]:
    prompt = sum(len(p.prompt_ids) for p in ctx.plans)
    completion = sum(c.finish.num_tokens for c in choices.values() if c.finish)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def chat_response(ctx: Context, choices: dict[int, ChoiceState]) -> dict[str, Any]:
    out = []
    for i in sorted(choices):
        st = choices[i]
        text = ctx.plans[i // ctx.n].echo_text + st.text
        message: dict[str, Any] = {
            "role": "assistant",
            "content": text if (text.strip() or not st.tool_calls) else None,
            "refusal": None,
        }
        if st.tool_calls:
            message["tool_calls"] = st.tool_calls
        out.append(
            {
                "index": i,
                "message": message,
                "logprobs": _chat_logprobs(st.logprobs) if ctx.logprobs else None,
                "finish_reason": st.finish.reason if st.finish else "stop",
            }
        )
    return _envelope(ctx, "chat.completion", out) | {"usage": usage(ctx, choices)}


def completion_response(ctx: Context, choices: dict[int, ChoiceState]) -> dict[str, Any]:
    out = []
    for i in sorted(choices):
        st = choices[i]
        echo = ctx.plans[i // ctx.n].echo_text
        out.append(
            {
                "index": i,
                "text": echo + st.text,
                "logprobs": _completion_logprobs(st.logprobs, len(echo)) if ctx.logprobs else None,
                "finish_reason": st.finish.reason if st.finish else "stop",
            }
        )
    return _envelope(ctx, "text_completion", out) | {"usage": usage(ctx, choices)}


def _envelope(ctx: Context, obj: str, choices: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": ctx.id,
        "object": obj,
        "created": ctx.created,
        "model": ctx.model_name,
        "system_fingerprint": ctx.fingerprint,
        "choices": choices,
    }


def _lp(value: float) -> float:
    return max(float(value), _MIN_LOGPROB)


def _chat_logprobs(lps: list[PositionLogprobs]) -> dict[str, Any]:
    def entry(lp: Any) -> dict[str, Any]:
        return {
            "token": lp.token,
            "logprob": _lp(lp.logprob),
            "bytes": list(lp.token.encode("utf-8")),
        }

    content = [entry(p.chosen) | {"top_logprobs": [entry(t) for t in p.top]} for p in lps]
    return {"content": content, "refusal": None}


def _completion_logprobs(lps: list[PositionLogprobs], start: int) -> dict[str, Any]:
    offsets, pos = [], start
    for p in lps:
        offsets.append(pos)
        pos += len(p.chosen.token)
    return {
        "tokens": [p.chosen.token for p in lps],
        "token_logprobs": [_lp(p.chosen.logprob) for p in lps],
        "top_logprobs": [{t.token: _lp(t.logprob) for t in p.top} for p in lps],
        "text_offset": offsets,
    }


# ---- streaming --------------------------------------------------------------------------------


def sse(data: Any) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"


async def stream_chunks(
    stream: AsyncIterator[Event], ctx: Context, timing: Timing, on_exit: Callable[[bool], None]
) -> AsyncIterator[str]:
    """SSE lines in OpenAI's shape; ``on_exit(completed)`` runs however the stream ends
    (``completed`` is False when the client went away first)."""
    chat = ctx.kind == "chat"
    obj = "chat.completion.chunk" if chat else "text_completion"
    extra = {"usage": None} if ctx.include_usage else {}
    finishes: dict[int, Finish] = {}
    tool_counts: dict[int, int] = {}
    offsets = {i: len(ctx.plans[i // ctx.n].echo_text) for i in range(len(ctx.plans) * ctx.n)}
    completed = False
    failures: list[APIError] = []

    def chunk(choice: dict[str, Any]) -> str:
        return sse(_envelope(ctx, obj, [choice]) | extra)

    try:
        num = len(ctx.plans) * ctx.n
        for i in range(num):
            echo = ctx.plans[i // ctx.n].echo_text
            if chat:
                first = {"role": "assistant", "content": echo}
                yield chunk({"index": i, "delta": first, "logprobs": None, "finish_reason": None})
            elif echo:
                yield chunk({"index": i, "text": echo, "logprobs": None, "finish_reason": None})
        async for ev in _until_failure(stream, failures):
            if isinstance(ev, Finish):
                finishes[ev.index] = ev
                if ev.reason == "error":
                    yield sse(
                        APIError(
                            ev.error or "generation failed", status=500, type="server_error"
                        ).body()
                    )
                    continue
                yield chunk(_finish_choice(ev, chat))
                continue
            timing.token()
            if isinstance(ev, ToolCalls):
                yield chunk(_tool_choice(ev, tool_counts))
            else:
                yield chunk(_delta_choice(ev, ctx, offsets.get(ev.index, 0)))
                offsets[ev.index] = offsets.get(ev.index, 0) + len(ev.text)
        if failures:  # ended early (server shutdown): an error event closes the stream
            yield sse(failures[0].body())
            yield "data: [DONE]\n\n"
            completed = True
            return
        timing.done(list(finishes.values()))
        if ctx.include_usage:
            states = {i: ChoiceState(finish=f) for i, f in finishes.items()}
            yield sse(_envelope(ctx, obj, []) | {"usage": usage(ctx, states)})
        yield "data: [DONE]\n\n"
        completed = True
    finally:
        on_exit(completed)


async def _until_failure(
    stream: AsyncIterator[Event], failures: list[APIError]
) -> AsyncIterator[Event]:
    """``stream``'s events until it raises an APIError, which is appended to ``failures``."""
    try:
        async for ev in stream:
            yield ev
    except APIError as e:
        failures.append(e)


def _finish_choice(ev: Finish, chat: bool) -> dict[str, Any]:
    body = {"delta": {}} if chat else {"text": ""}
    return {"index": ev.index, **body, "logprobs": None, "finish_reason": ev.reason}


def _tool_choice(ev: ToolCalls, counts: dict[int, int]) -> dict[str, Any]:
    base = counts.get(ev.index, 0)
    counts[ev.index] = base + len(ev.calls)
    calls = [{"index": base + k, **call} for k, call in enumerate(ev.calls)]
    return {
        "index": ev.index,
        "delta": {"tool_calls": calls},
        "logprobs": None,
        "finish_reason": None,
    }


def _delta_choice(ev: Delta, ctx: Context, offset: int = 0) -> dict[str, Any]:
    if ctx.kind == "chat":
        lp = _chat_logprobs(ev.logprobs) if ctx.logprobs else None
        return {
            "index": ev.index,
            "delta": {"content": ev.text},
            "logprobs": lp,
            "finish_reason": None,
        }
    lp = _completion_logprobs(ev.logprobs, offset) if ctx.logprobs else None
    return {"index": ev.index, "text": ev.text, "logprobs": lp, "finish_reason": None}
