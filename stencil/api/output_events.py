"""The events every response is rendered from, and how one engine request's cumulative
``RequestOutput``s become them: ``Delta`` (new text + logprobs), ``ToolCalls`` (parsed calls) and
``Finish``, per choice. Chat chunks, completion bodies and the Responses API's items and stream
events are all built from these (``chat_render``, ``responses_api.render``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from stencil.api.engine_client import Generation
from stencil.api.errors import APIError
from stencil.api.model_info import ModelInfo
from stencil.api.openai.convert import Plan
from stencil.api.tools.calls import openai_calls
from stencil.api.tools.harmony_parser import HarmonyParser
from stencil.engine.outputs import CompletionOutput, PositionLogprobs


@dataclass(slots=True)
class Delta:
    index: int
    text: str
    logprobs: list[PositionLogprobs] = field(default_factory=list)
    reasoning: bool = False  # the text is reasoning (harmony's analysis channel), not content


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
    error_type: str | None = None  # CompletionOutput.error_type

    def api_error(self) -> APIError:
        """A failed choice's error: a 400 when the request's constraint could go no further
        (its grammar's limits, a decode-time check left no continuation), else a 500."""
        message = self.error or "generation failed"
        if self.error_type == "constraint":
            return APIError(message, status=400, code="constraint_failed")
        return APIError(message, status=500, type="server_error", code="generation_error")


Event = Delta | ToolCalls | Finish


async def events(
    plan: Plan, gen: Generation, model: ModelInfo, offset: int = 0
) -> AsyncIterator[Event]:
    """Per-choice events for one plan; choice indices are shifted by ``offset``."""
    if plan.harmony:
        stream = _harmony_events(gen)
    elif plan.tools is None:
        stream = _plain_events(gen)
    else:
        stream = _tool_events(plan, gen, model)
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
                yield Finish(c.index, _reason(c), len(c.token_ids), c.error, c.error_type)


async def _harmony_events(gen: Generation) -> AsyncIterator[Event]:
    """A harmony reply (``harmony_parser``): analysis as reasoning, the final channel as
    content, a call as ``ToolCalls``. A step's new logprobs go with its content."""
    parsers: dict[int, HarmonyParser] = {}
    sent: dict[int, tuple[int, int]] = {}  # index -> (chars, logprobs) read
    done: set[int] = set()
    async for out in gen:
        for c in out.outputs:
            if c.index in done:
                continue
            parser = parsers.setdefault(c.index, HarmonyParser())
            chars, lps = sent.get(c.index, (0, 0))
            new_lps = list((c.logprobs or [])[lps:])
            sent[c.index] = (len(c.text), len(c.logprobs or []))
            pieces = parser.feed(c.text[chars:])
            if c.finish_reason is not None:
                done.add(c.index)
                pieces += parser.finish()
            for p in pieces:
                if p.kind == "content":
                    yield Delta(c.index, p.text, new_lps)
                    new_lps = []
                else:
                    yield Delta(c.index, p.text, reasoning=True)
            if c.finish_reason is None:
                continue
            if parser.calls:
                yield ToolCalls(c.index, openai_calls(parser.calls))
                yield Finish(c.index, "tool_calls", len(c.token_ids))
            else:
                yield Finish(c.index, _reason(c), len(c.token_ids), c.error, c.error_type)


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
    content, calls = plan.tool_format.parse(c.text, bare=not auto, names=plan.tools.tool_names)
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
    if auto and not plan.answer and reason == "stop" and _at_budget(plan, c, model):
        reason = "length"  # free text cut by max_tokens (the text branch always "closes")
    return [*out, Finish(c.index, reason, len(c.token_ids), c.error, c.error_type)]


def _at_budget(plan: Plan, c: CompletionOutput, model: ModelInfo) -> bool:
    """Did the text end because max_tokens ran out (its last token is not an end token)?"""
    if not c.token_ids or len(c.token_ids) < (plan.params.max_tokens or 0):
        return False
    last = c.token_ids[-1]
    return last != c.stop_reason and model.tokenizer.decode([last], skip_special_tokens=True) != ""


def _reason(c: CompletionOutput) -> str:
    # a constrained output that is complete at max_tokens already says "stop" (close_on_length)
    return c.finish_reason or "stop"
