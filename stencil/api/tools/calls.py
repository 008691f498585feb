"""Tool calls on the wire: OpenAI ``tool_calls`` objects built from parsed calls, and a past
call's ``arguments`` read back."""

from __future__ import annotations

import json
import uuid
from typing import Any

from stencil.api.errors import bad_request


def openai_calls(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Parsed ``{"name", "arguments"}`` calls as OpenAI ``tool_calls`` (arguments a JSON string)."""
    return [
        {
            "id": new_call_id(),
            "type": "function",
            "function": {
                "name": c["name"],
                "arguments": json.dumps(c["arguments"], ensure_ascii=False),
            },
        }
        for c in calls
    ]


def call_arguments(args: Any) -> Any:
    """A past call's ``arguments`` (a JSON string on the wire) as the JSON value it holds."""
    if not isinstance(args, str):
        return args
    try:
        return json.loads(args)
    except json.JSONDecodeError as e:
        raise bad_request(
            f"tool call arguments are not valid JSON: {e}", "messages.tool_calls"
        ) from None


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"
