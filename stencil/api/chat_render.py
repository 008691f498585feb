"""Chat and completion responses, streaming (SSE) and not, rendered from a request's events
(``engine_stream``): the chat renderer beside the Responses API's (``responses_api.render``)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from stencil.api.engine_stream import ChoiceState, EventStream, until_failure
from stencil.api.errors import APIError
from stencil.api.output_events import Delta, Finish, ToolCalls
from stencil.api.request_plan import Plan
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
    include_usage: bool = False
    logprobs: bool = False
    id: str = ""
    created: int = field(default_factory=lambda: int(time.time()))

    def __post_init__(self) -> None:
        if not self.id:
            prefix = "chatcmpl" if self.kind == "chat" else "cmpl"
            self.id = f"{prefix}-{uuid.uuid4().hex}"


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
        if st.reasoning:
            message["reasoning_content"] = st.reasoning
        out.append(
            {
                "index": i,
                "message": message,
                "logprobs": chat_logprobs(st.logprobs) if ctx.logprobs else None,
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


def chat_logprobs(lps: list[PositionLogprobs]) -> dict[str, Any]:
    def entry(lp: Any) -> dict[str, Any]:
        return {
            "token": lp.token,
            "logprob": _lp(lp.logprob),
            "bytes": list(lp.raw if lp.raw is not None else lp.token.encode("utf-8")),
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
    stream: EventStream, ctx: Context, on_exit: Callable[[bool], None]
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
        async for ev in until_failure(aiter(stream), failures):
            if isinstance(ev, Finish):
                finishes[ev.index] = ev
                if ev.reason == "error":
                    yield sse(ev.api_error().body())
                    continue
                yield chunk(_finish_choice(ev, chat))
                continue
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
        if ctx.include_usage:
            states = {i: ChoiceState(finish=f) for i, f in finishes.items()}
            yield sse(_envelope(ctx, obj, []) | {"usage": usage(ctx, states)})
        yield "data: [DONE]\n\n"
        completed = True
    finally:
        on_exit(completed)


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
        lp = chat_logprobs(ev.logprobs) if ctx.logprobs else None
        return {
            "index": ev.index,
            "delta": {"reasoning_content" if ev.reasoning else "content": ev.text},
            "logprobs": lp,
            "finish_reason": None,
        }
    lp = _completion_logprobs(ev.logprobs, offset) if ctx.logprobs else None
    return {"index": ev.index, "text": ev.text, "logprobs": lp, "finish_reason": None}
