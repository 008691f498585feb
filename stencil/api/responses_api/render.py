"""The Responses API renderer: the same engine events the chat renderer reads, as a ``response``
object (``output`` items: a ``message`` with ``output_text``, ``function_call``s) or as the SDK's
stream of events (``response.created`` ... ``response.completed``, numbered in order)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from stencil.api.chat_render import chat_logprobs
from stencil.api.errors import APIError
from stencil.api.event_stream import ChoiceState, EventStream, until_failure
from stencil.api.events import Delta, Finish, ToolCalls
from stencil.api.responses_api.protocol import ResponsesRequest


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


@dataclass(slots=True)
class ResponseBuilder:
    """One response: its fixed facts (echoed request fields), and its output as events arrive."""

    req: ResponsesRequest
    model_name: str
    prompt_tokens: int
    logprobs: bool
    id: str = field(default_factory=lambda: new_id("resp"))
    created_at: int = field(default_factory=lambda: int(time.time()))
    message_id: str = field(default_factory=lambda: new_id("msg"))
    state: ChoiceState = field(default_factory=ChoiceState)
    call_ids: list[str] = field(default_factory=list)

    def add(self, ev: Delta | ToolCalls | Finish) -> None:
        st = self.state
        if isinstance(ev, Delta):
            st.text += ev.text
            st.logprobs += ev.logprobs
        elif isinstance(ev, ToolCalls):
            st.tool_calls += ev.calls
            self.call_ids += [new_id("fc") for _ in ev.calls]
        else:
            st.finish = ev

    def message_item(self, status: str = "completed", with_text: bool = True) -> dict[str, Any]:
        part = self.text_part() if with_text else None
        return {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "status": status,
            "content": [part] if part else [],
        }

    def text_part(self, text: str | None = None) -> dict[str, Any]:
        lps = chat_logprobs(self.state.logprobs)["content"] if self.logprobs else []
        body = self.state.text if text is None else text
        return {"type": "output_text", "text": body, "annotations": [], "logprobs": lps}

    def call_item(self, k: int, status: str = "completed") -> dict[str, Any]:
        call = self.state.tool_calls[k]
        return {
            "id": self.call_ids[k],
            "type": "function_call",
            "status": status,
            "call_id": call["id"],
            "name": call["function"]["name"],
            "arguments": call["function"]["arguments"] if status == "completed" else "",
        }

    def has_message(self) -> bool:
        return bool(self.state.text.strip()) or not self.state.tool_calls

    def output(self) -> list[dict[str, Any]]:
        calls = [self.call_item(k) for k in range(len(self.state.tool_calls))]
        return ([self.message_item()] if self.has_message() else []) + calls

    def response(self, status: str = "completed", output: list[Any] | None = None) -> dict:
        """The ``response`` object; ``status`` ``in_progress`` for the stream's first events."""
        finish = self.state.finish
        incomplete = finish is not None and finish.reason == "length"
        if status == "completed" and incomplete:
            status = "incomplete"
        req = self.req
        out_tokens = finish.num_tokens if finish else 0
        text = {"format": {"type": "text"}}
        if req.text is not None:
            text = req.text.model_dump(exclude_none=True, by_alias=True) or text
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "completed_at": int(time.time()) if status != "in_progress" else None,
            "status": status,
            "background": False,
            "error": None,
            "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
            "instructions": req.instructions,
            "max_output_tokens": req.max_output_tokens,
            "max_tool_calls": req.max_tool_calls,
            "metadata": req.metadata or {},
            "model": self.model_name,
            "output": self.output() if output is None else output,
            "parallel_tool_calls": req.parallel_tool_calls is not False,
            "previous_response_id": req.previous_response_id,
            "reasoning": req.reasoning.model_dump() if req.reasoning else None,
            "store": req.store is not False,
            "temperature": 1.0 if req.temperature is None else req.temperature,
            "text": text,
            "tool_choice": req.tool_choice or "auto",
            "tools": req.tools or [],
            "top_logprobs": req.top_logprobs,
            "top_p": 1.0 if req.top_p is None else req.top_p,
            "truncation": req.truncation or "disabled",
            "usage": self.usage(out_tokens) if status != "in_progress" else None,
            "user": req.user,
        }

    def usage(self, out_tokens: int) -> dict[str, Any]:
        return {
            "input_tokens": self.prompt_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": out_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": self.prompt_tokens + out_tokens,
        }

    def output_messages(self) -> list[dict[str, Any]]:
        """This response's output as chat messages (the next turn's history)."""
        st = self.state
        msg: dict[str, Any] = {
            "role": "assistant",
            "content": st.text if self.has_message() else None,
        }
        if st.tool_calls:
            msg["tool_calls"] = list(st.tool_calls)
        return [msg]


def response_body(builder: ResponseBuilder, choices: dict[int, ChoiceState]) -> dict[str, Any]:
    """The non-streaming body, from the collected choice (a Responses request has one)."""
    choice = choices.get(0, ChoiceState())
    for ev in (Delta(0, choice.text, choice.logprobs), ToolCalls(0, choice.tool_calls)):
        builder.add(ev)
    if choice.finish is not None:
        builder.add(choice.finish)
    return builder.response()


# ---- streaming --------------------------------------------------------------------------------


class EventWriter:
    """Numbered SSE events (``event:`` line + JSON ``data:`` with ``sequence_number``)."""

    def __init__(self) -> None:
        self.seq = 0

    def __call__(self, kind: str, **fields: Any) -> str:
        data = {"type": kind, "sequence_number": self.seq, **fields}
        self.seq += 1
        return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


async def stream_events(
    stream: EventStream,
    builder: ResponseBuilder,
    on_exit: Callable[[bool], None],
    on_done: Callable[[dict[str, Any]], None],
) -> AsyncIterator[str]:
    """The SDK's event sequence; ``on_done(response)`` runs once the response completed."""
    emit, completed, failures = EventWriter(), False, []
    mid = builder.message_id
    opened = False  # the message item (and its one output_text part) has been announced
    pending = ""  # leading whitespace held until it is known to be a message (not only calls)
    try:
        yield emit("response.created", response=builder.response("in_progress", []))
        yield emit("response.in_progress", response=builder.response("in_progress", []))
        async for ev in until_failure(aiter(stream), failures):
            builder.add(ev)
            if isinstance(ev, Delta):
                pending += ev.text
                if not opened and not pending.strip():
                    continue
                if not opened:
                    opened = True
                    yield emit("response.output_item.added", output_index=0,
                               item=builder.message_item("in_progress", with_text=False))  # fmt: skip
                    yield emit("response.content_part.added", item_id=mid, output_index=0,
                               content_index=0, part=builder.text_part(""))  # fmt: skip
                lps = chat_logprobs(ev.logprobs)["content"] if builder.logprobs else []
                yield emit("response.output_text.delta", item_id=mid, output_index=0,
                           content_index=0, delta=pending, logprobs=lps)  # fmt: skip
                pending = ""
            elif isinstance(ev, ToolCalls):
                if opened:
                    for line in _close_message(emit, builder):
                        yield line
                first = len(builder.state.tool_calls) - len(ev.calls)
                for k in range(first, len(builder.state.tool_calls)):
                    for line in _call_events(emit, builder, k, int(builder.has_message()) + k):
                        yield line
            elif ev.reason == "error":
                failures.append(APIError(ev.error or "generation failed", status=500))
        if failures:
            err = failures[0]
            yield emit("error", code=err.code or "server_error", message=err.message, param=None)
            completed = True
            return
        if not builder.state.tool_calls and not opened:  # an empty or whitespace-only message
            yield emit("response.output_item.added", output_index=0,
                       item=builder.message_item("in_progress", with_text=False))  # fmt: skip
            yield emit("response.content_part.added", item_id=mid, output_index=0,
                       content_index=0, part=builder.text_part(""))  # fmt: skip
            opened = True
        if opened and not builder.state.tool_calls:
            if pending:
                yield emit("response.output_text.delta", item_id=mid, output_index=0,
                           content_index=0, delta=pending, logprobs=[])  # fmt: skip
            for line in _close_message(emit, builder):
                yield line
        final = builder.response()
        kind = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
        yield emit(kind, response=final)
        completed = True
        on_done(final)
    finally:
        on_exit(completed)


def _close_message(emit: EventWriter, b: ResponseBuilder) -> list[str]:
    part = b.text_part()
    return [
        emit("response.output_text.done", item_id=b.message_id, output_index=0, content_index=0,
             text=part["text"], logprobs=part["logprobs"]),
        emit("response.content_part.done", item_id=b.message_id, output_index=0, content_index=0,
             part=part),
        emit("response.output_item.done", output_index=0, item=b.message_item()),
    ]  # fmt: skip


def _call_events(emit: EventWriter, b: ResponseBuilder, k: int, index: int) -> list[str]:
    item = b.call_item(k)
    return [
        emit("response.output_item.added", output_index=index, item=b.call_item(k, "in_progress")),
        emit("response.function_call_arguments.delta", item_id=item["id"], output_index=index,
             delta=item["arguments"]),
        emit("response.function_call_arguments.done", item_id=item["id"], output_index=index,
             name=item["name"], arguments=item["arguments"]),
        emit("response.output_item.done", output_index=index, item=item),
    ]  # fmt: skip
