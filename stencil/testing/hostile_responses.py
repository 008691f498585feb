"""Hostile requests for the Responses API (``/v1/responses``): bad and unknown input items,
built-in tools, huge input, unknown and evicted stored ids. Part of ``hostile_corpus``."""

from __future__ import annotations

import json
from typing import Any

from stencil.testing.hostile_payload import MB, Payload

RESPONSES = "/v1/responses"
NOT_FOUND = frozenset({404})
EVICTED = "resp_0123456789abcdef0123456789abcdef"  # never stored: unknown and evicted read alike


def responses(**fields: Any) -> bytes:
    return json.dumps({"input": "Say hi.", "max_output_tokens": 8, **fields}).encode()


def _items(*items: Any) -> bytes:
    return responses(input=list(items))


def _p(name: str, body: bytes, **kw: Any) -> Payload:
    return Payload(f"responses {name}", "responses", body, RESPONSES, **kw)


def responses_payloads(max_model_len: int) -> list[Payload]:
    user = {"role": "user", "content": "hi"}
    call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
    big_id = "resp_" + "x" * MB
    return [
        _p("item not an object", _items(1, "two")),
        _p("item without type or role", _items({"content": "hi"})),
        _p("item of unknown type", _items({"type": "wizard_spell", "power": 9})),
        _p("built-in tool item", _items({"type": "web_search_call", "id": "ws", "status": "x"})),
        _p("item reference", _items({"type": "item_reference", "id": "msg_1"})),
        _p("message with unknown role", _items({"role": "wizard", "content": "x"})),
        _p(
            "image part",
            _items({"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}),
        ),
        _p("part of unknown type", _items({"role": "user", "content": [{"type": "?", "t": 1}]})),
        _p(
            "call output without its call",
            _items(user, {"type": "function_call_output", "call_id": "c9", "output": "x"}),
        ),
        _p("call id of 1 MB", _items(user, {**call, "call_id": "c" * MB}), echo="c" * 5000),
        _p(
            "call arguments not JSON",
            _items(
                user,
                {**call, "arguments": "{nope"},
                {"type": "function_call_output", "call_id": "c1", "output": "x"},
            ),
        ),
        _p("empty input", _items()),
        _p("50k items", _items(*[user] * 50_000)),
        _p("input beyond the context", responses(input="word " * (max_model_len * 3))),
        _p("input of 12 MB", responses(input="a " * (6 * MB))),
        _p(
            "json_schema without schema",
            responses(text={"format": {"type": "json_schema", "name": "x"}}),
        ),
        _p("text format unknown", responses(text={"format": {"type": "grammar"}})),
        _p("built-in tool", responses(tools=[{"type": "code_interpreter", "container": "x"}])),
        _p("hosted tool_choice", responses(tool_choice={"type": "file_search"})),
        _p(
            "tool_choice names a missing tool",
            responses(tool_choice={"type": "function", "name": "nope"}),
        ),
        _p("background", responses(background=True)),
        _p("max_output_tokens 0", responses(max_output_tokens=0)),
        _p("top_logprobs 1e6", responses(top_logprobs=10**6)),
        _p(
            "evicted previous_response_id",
            responses(previous_response_id=EVICTED),
            expect=NOT_FOUND,
        ),
        _p(
            "previous_response_id of 1 MB",
            responses(previous_response_id=big_id),
            expect=NOT_FOUND,
            echo="x" * 5000,
        ),
        Payload(
            "responses GET an evicted id",
            "responses",
            b"",
            f"{RESPONSES}/{EVICTED}",
            expect=NOT_FOUND,
            method="GET",
        ),
        Payload(
            "responses DELETE an unknown id",
            "responses",
            b"",
            f"{RESPONSES}/resp_nope",
            expect=NOT_FOUND,
            method="DELETE",
        ),
    ]
