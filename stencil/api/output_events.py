"""The events every response is rendered from: ``Delta`` (new text + logprobs), ``ToolCalls``
(parsed calls) and ``Finish``, per choice, and how a plain reply's cumulative ``RequestOutput``s
become them (a reply with tool calls: ``tools.parser``). Chat chunks, completion bodies and the
Responses API's items and stream events are all built from these (``chat_render``,
``responses_api.render``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from stencil.api.engine_client import Generation
from stencil.api.errors import APIError
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


async def plain_events(gen: Generation) -> AsyncIterator[Event]:
    """A plain reply's events: each choice's new text (with its logprobs), then its finish."""
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
                yield Finish(c.index, finish_reason(c), len(c.token_ids), c.error, c.error_type)


def finish_reason(c: CompletionOutput) -> str:
    # a constrained output that is complete at max_tokens already says "stop" (close_on_length)
    return c.finish_reason or "stop"
