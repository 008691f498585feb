"""A reply's tool calls read back as it streams (vLLM's tool parser), as the request's
tool-parsing plan says (``request_plan.ToolParsing``): the events of a reply in a family's call
syntax (``formats``) or in GPT-OSS's harmony format (``harmony_parser``): text as ``Delta``s,
the calls as one ``ToolCalls``, then ``Finish``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from stencil.api.engine_client import Generation
from stencil.api.output_events import Delta, Event, Finish, ToolCalls, finish_reason
from stencil.api.request_plan import ToolParsing
from stencil.api.tools.calls import openai_calls
from stencil.api.tools.harmony_parser import HarmonyParser
from stencil.engine.outputs import CompletionOutput


async def harmony_events(gen: Generation) -> AsyncIterator[Event]:
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
                yield Finish(c.index, finish_reason(c), len(c.token_ids), c.error, c.error_type)


async def tool_events(
    gen: Generation, parsing: ToolParsing, max_tokens: int, tokenizer: Any
) -> AsyncIterator[Event]:
    """Tools in one constrained request: forced, the output is the calls; ``auto``, text is
    streamed until the family's trigger (beside an answer format, also its ``fence``) starts a
    call (``formats``), which is held back and parsed when it is complete. ``max_tokens`` and
    ``tokenizer`` tell a free text cut by the budget."""
    fmt, auto = parsing.format, parsing.auto
    sent: dict[int, tuple[int, int]] = {}  # index -> (chars, logprobs) emitted
    started: set[int] = set()
    done: set[int] = set()
    async for out in gen:
        for c in out.outputs:
            if c.index in done:
                continue
            if auto and c.index not in started:
                safe, call = fmt.split(c.text, fenced=parsing.answer)
                if call:
                    started.add(c.index)
                chars, lps = sent.get(c.index, (0, 0))
                if len(safe) > chars:
                    yield Delta(c.index, safe[chars:], list((c.logprobs or [])[lps:]))
                    sent[c.index] = (len(safe), len(c.logprobs or []))
            if c.finish_reason is not None:
                done.add(c.index)
                for ev in _finish(parsing, c, sent.get(c.index, (0, 0)), max_tokens, tokenizer):
                    yield ev


def _finish(
    parsing: ToolParsing,
    c: CompletionOutput,
    sent: tuple[int, int],
    max_tokens: int,
    tokenizer: Any,
) -> list[Event]:
    auto = parsing.auto
    content, calls = parsing.format.parse(
        c.text, bare=not auto, names=parsing.names, fenced=parsing.answer
    )
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
    reason = finish_reason(c)
    if auto and not parsing.answer and reason == "stop" and _at_budget(c, max_tokens, tokenizer):
        reason = "length"  # free text cut by max_tokens (the text branch always "closes")
    return [*out, Finish(c.index, reason, len(c.token_ids), c.error, c.error_type)]


def _at_budget(c: CompletionOutput, max_tokens: int, tokenizer: Any) -> bool:
    """Did the text end because max_tokens ran out (its last token is not an end token)?"""
    if not c.token_ids or len(c.token_ids) < max_tokens:
        return False
    last = c.token_ids[-1]
    return last != c.stop_reason and tokenizer.decode([last], skip_special_tokens=True) != ""
