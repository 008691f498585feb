"""The Responses API renderer: the same engine events the chat renderer reads, as a ``response``
object (``output``: a ``reasoning`` item for a reasoning model, a ``message`` with one
``output_text``, ``function_call``s) or as the SDK's stream of events (``response.created`` ...
``response.completed``, numbered in order); ``stream`` holds the streaming half."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from stencil.api.chat_render import chat_logprobs
from stencil.api.engine_stream import ChoiceState
from stencil.api.output_events import Delta, Finish, ToolCalls
from stencil.api.responses_api.protocol import ResponsesRequest
from stencil.api.responses_api.reasoning import ReasoningSplit


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


@dataclass(slots=True)
class ResponseBuilder:
    """One response: its fixed facts (echoed request fields), and its output as events arrive.
    ``add`` returns the new reasoning and answer text of a delta (what a stream sends)."""

    req: ResponsesRequest
    model_name: str
    prompt_tokens: int
    logprobs: bool
    split: ReasoningSplit
    id: str = field(default_factory=lambda: new_id("resp"))
    created_at: int = field(default_factory=lambda: int(time.time()))
    message_id: str = field(default_factory=lambda: new_id("msg"))
    reasoning_id: str = field(default_factory=lambda: new_id("rs"))
    state: ChoiceState = field(default_factory=ChoiceState)
    reasoning: str = ""
    call_ids: list[str] = field(default_factory=list)

    def add(self, ev: Delta | ToolCalls | Finish) -> tuple[str, str]:
        st = self.state
        if isinstance(ev, Delta) and ev.reasoning:  # already split (harmony's analysis)
            self.reasoning += ev.text
            return ev.text, ""
        if isinstance(ev, Delta):
            reasoning, answer = self.split.feed(ev.text)
            self.reasoning += reasoning
            st.text += answer
            if answer:  # a delta that is reasoning only keeps its logprobs out of the message
                st.logprobs += ev.logprobs
            return reasoning, answer
        if isinstance(ev, ToolCalls):
            st.tool_calls += ev.calls
            self.call_ids += [new_id("fc") for _ in ev.calls]
        else:
            st.finish = ev
        return self.flush(), ""

    def flush(self) -> str:
        rest = self.split.flush()
        self.reasoning += rest
        return rest

    # ---- items ----

    @property
    def has_reasoning(self) -> bool:
        return bool(self.reasoning)

    @property
    def message_index(self) -> int:
        return int(self.has_reasoning)

    def has_message(self) -> bool:
        return bool(self.state.text.strip()) or not (self.state.tool_calls or self.reasoning)

    def call_index(self, k: int) -> int:
        return self.message_index + int(self.has_message()) + k

    def reasoning_item(self, status: str = "completed") -> dict[str, Any]:
        done = status == "completed"
        content = [{"type": "reasoning_text", "text": self.reasoning}] if done else []
        return {
            "id": self.reasoning_id,
            "type": "reasoning",
            "status": status,
            "summary": [],
            "content": content,
        }

    def message_item(self, status: str = "completed") -> dict[str, Any]:
        return {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "status": status,
            "content": [self.text_part()] if status == "completed" else [],
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

    def output(self) -> list[dict[str, Any]]:
        items = [self.reasoning_item()] if self.has_reasoning else []
        items += [self.message_item()] if self.has_message() else []
        return items + [self.call_item(k) for k in range(len(self.state.tool_calls))]

    # ---- the response object ----

    def response(self, status: str = "completed") -> dict[str, Any]:
        """The ``response`` object; ``in_progress`` (no output yet) for the stream's first
        events; ``completed`` becomes ``incomplete`` when the output budget ran out."""
        finish = self.state.finish
        incomplete = finish is not None and finish.reason == "length"
        if status == "completed" and incomplete:
            status = "incomplete"
        req, final = self.req, status != "in_progress"
        text = req.text.model_dump(exclude_none=True, by_alias=True) if req.text else {}
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "completed_at": int(time.time()) if final else None,
            "status": status,
            "background": False,
            "error": None,
            "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
            "instructions": req.instructions,
            "max_output_tokens": req.max_output_tokens,
            "max_tool_calls": req.max_tool_calls,
            "metadata": req.metadata or {},
            "model": self.model_name,
            "output": self.output() if final else [],
            "parallel_tool_calls": req.parallel_tool_calls is not False,
            "previous_response_id": req.previous_response_id,
            "reasoning": req.reasoning.model_dump() if req.reasoning else None,
            "store": req.store is not False,
            "temperature": 1.0 if req.temperature is None else req.temperature,
            "text": {"format": {"type": "text"}, **text},
            "tool_choice": req.tool_choice or "auto",
            "tools": req.tools or [],
            "top_logprobs": req.top_logprobs,
            "top_p": 1.0 if req.top_p is None else req.top_p,
            "truncation": req.truncation or "disabled",
            "usage": self.usage(finish.num_tokens if finish else 0) if final else None,
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
        content = st.text if self.has_message() else None
        msg: dict[str, Any] = {"role": "assistant", "content": content}
        if st.tool_calls:
            msg["tool_calls"] = list(st.tool_calls)
        return [msg]


def response_body(builder: ResponseBuilder, choices: dict[int, ChoiceState]) -> dict[str, Any]:
    """The non-streaming body, from the collected choice (a Responses request has one)."""
    choice = choices.get(0, ChoiceState())
    if choice.reasoning:
        builder.add(Delta(0, choice.reasoning, reasoning=True))
    builder.add(Delta(0, choice.text, choice.logprobs))
    if choice.tool_calls:
        builder.add(ToolCalls(0, choice.tool_calls))
    builder.add(choice.finish or Finish(0, "stop", 0))
    return builder.response()
