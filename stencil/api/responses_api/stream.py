"""The Responses API's stream: the SDK's event sequence, rendered from the request's engine events
as they arrive. Items open when their first text (or call) is known and close before the next
item opens; leading whitespace of the message is held until it is known to be a message (not the
gap before a tool call), so the streamed items are the non-streamed ones."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from stencil.api.chat_render import chat_logprobs
from stencil.api.engine_stream import EventStream, until_failure
from stencil.api.output_events import Delta, ToolCalls
from stencil.api.responses_api.render import ResponseBuilder


class EventWriter:
    """Numbered SSE events (``event:`` line + JSON ``data:`` with ``sequence_number``)."""

    def __init__(self) -> None:
        self.seq = 0

    def __call__(self, kind: str, **fields: Any) -> str:
        data = {"type": kind, "sequence_number": self.seq, **fields}
        self.seq += 1
        return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


class ItemStream:
    """Which output items are open, and the events that open, fill and close them."""

    def __init__(self, b: ResponseBuilder, emit: EventWriter) -> None:
        self.b, self.emit = b, emit
        self.reasoning = "closed"  # "closed" (never opened) | "open" | "done"
        self.message = "closed"
        self.pending = ""  # leading message whitespace held back

    def reasoning_text(self, text: str) -> Iterator[str]:
        b, emit = self.b, self.emit
        if not text:
            return
        if self.reasoning == "closed":
            self.reasoning = "open"
            yield emit(
                "response.output_item.added", output_index=0, item=b.reasoning_item("in_progress")
            )
        yield emit(
            "response.reasoning_text.delta",
            item_id=b.reasoning_id,
            output_index=0,
            content_index=0,
            delta=text,
        )

    def close_reasoning(self) -> Iterator[str]:
        b, emit = self.b, self.emit
        if self.reasoning == "open":
            self.reasoning = "done"
            yield emit(
                "response.reasoning_text.done",
                item_id=b.reasoning_id,
                output_index=0,
                content_index=0,
                text=b.reasoning,
            )
            yield emit("response.output_item.done", output_index=0, item=b.reasoning_item())

    def answer_text(self, text: str, logprobs: list[Any], force: bool = False) -> Iterator[str]:
        b, emit = self.b, self.emit
        self.pending += text
        if self.message == "closed" and not self.pending.strip() and not force:
            return
        yield from self.close_reasoning()
        at = b.message_index
        if self.message == "closed":
            self.message = "open"
            yield emit(
                "response.output_item.added", output_index=at, item=b.message_item("in_progress")
            )
            yield emit(
                "response.content_part.added",
                item_id=b.message_id,
                output_index=at,
                content_index=0,
                part=b.text_part(""),
            )
        if self.pending:
            lps = chat_logprobs(logprobs)["content"] if b.logprobs else []
            yield emit(
                "response.output_text.delta",
                item_id=b.message_id,
                output_index=at,
                content_index=0,
                delta=self.pending,
                logprobs=lps,
            )
        self.pending = ""

    def close_message(self) -> Iterator[str]:
        b, emit, at = self.b, self.emit, self.b.message_index
        if self.message != "open":
            return
        self.message = "done"
        part = b.text_part()
        yield emit(
            "response.output_text.done",
            item_id=b.message_id,
            output_index=at,
            content_index=0,
            text=part["text"],
            logprobs=part["logprobs"],
        )
        yield emit(
            "response.content_part.done",
            item_id=b.message_id,
            output_index=at,
            content_index=0,
            part=part,
        )
        yield emit("response.output_item.done", output_index=at, item=b.message_item())

    def calls(self, first: int) -> Iterator[str]:
        b, emit = self.b, self.emit
        yield from self.close_reasoning()
        yield from self.close_message()
        for k in range(first, len(b.state.tool_calls)):
            item, at = b.call_item(k), b.call_index(k)
            yield emit(
                "response.output_item.added", output_index=at, item=b.call_item(k, "in_progress")
            )
            yield emit(
                "response.function_call_arguments.delta",
                item_id=item["id"],
                output_index=at,
                delta=item["arguments"],
            )
            yield emit(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=at,
                name=item["name"],
                arguments=item["arguments"],
            )
            yield emit("response.output_item.done", output_index=at, item=item)

    def finish(self) -> Iterator[str]:
        b = self.b
        yield from self.reasoning_text(b.flush())
        if b.has_message():
            yield from self.answer_text("", [], force=True)
        yield from self.close_reasoning()
        yield from self.close_message()


async def stream_events(
    stream: EventStream,
    builder: ResponseBuilder,
    on_exit: Callable[[bool], None],
    on_done: Callable[[dict[str, Any]], None],
) -> AsyncIterator[str]:
    """The SDK's event sequence; ``on_done(response)`` runs once the response completed."""
    emit, completed, failures = EventWriter(), False, []
    items = ItemStream(builder, emit)
    try:
        yield emit("response.created", response=builder.response("in_progress"))
        yield emit("response.in_progress", response=builder.response("in_progress"))
        async for ev in until_failure(aiter(stream), failures):
            first = len(builder.state.tool_calls)
            reasoning, answer = builder.add(ev)
            for line in items.reasoning_text(reasoning):
                yield line
            if isinstance(ev, Delta):
                for line in items.answer_text(answer, ev.logprobs):
                    yield line
            elif isinstance(ev, ToolCalls):
                for line in items.calls(first):
                    yield line
            elif ev.reason == "error":
                failures.append(ev.api_error())
        if failures:
            err = failures[0]
            yield emit("error", code=err.code or "server_error", message=err.message, param=None)
            completed = True
            return
        for line in items.finish():
            yield line
        final = builder.response()
        kind = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
        yield emit(kind, response=final)
        completed = True
        on_done(final)
    finally:
        on_exit(completed)
