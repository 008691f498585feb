"""Parsed tool calls as OpenAI ``tool_calls`` objects (arguments a JSON string, a new id)."""

from __future__ import annotations

import json
import uuid
from typing import Any


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


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"
