"""Chat messages -> plain message dicts, as chat templates read them.

Each message's fields are checked here (a refused role or field is a 400 saying why), a message
``name`` is passed on (templates that have a place for it use it), past tool calls keep their
arguments as the JSON value they hold, and an assistant's ``reasoning_content`` goes under the
name the template reads. How past calls and the tools show in the prompt is ``tools.prompt``'s.
"""

from __future__ import annotations

import json
from typing import Any

from stencil.api.errors import bad_request
from stencil.api.openai.protocol import (
    AssistantMessage,
    FunctionMessage,
    SystemMessage,
    ToolMessage,
)
from stencil.api.openai.surface import MESSAGE_FIELDS, REFUSED_ROLES, refuse


def chat_messages(
    messages: list[Any], *, template: str, max_len: int, harmony: bool
) -> list[dict[str, Any]]:
    """``messages`` checked and as dicts; more messages than ``max_len`` (each renders to at
    least one token) is a 400 at once. ``harmony``: GPT-OSS's template, which takes one system
    or developer message, the first."""
    if len(messages) > max_len:
        raise bad_request(
            f"{len(messages)} messages cannot fit in this model's context of {max_len} tokens",
            "messages",
        )
    for i, m in enumerate(messages):
        _check_message(m, i, harmony)
    out = [_message_dict(m) for m in messages]
    _pass_reasoning(out, messages, template)
    return out


def _message_dict(msg: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"role": msg.role, "content": content_text(msg.content)}
    if isinstance(msg, SystemMessage):
        out["role"] = "system"
    elif isinstance(msg, ToolMessage):
        out["tool_call_id"] = msg.tool_call_id
    elif isinstance(msg, AssistantMessage) and msg.tool_calls:
        out["tool_calls"] = [
            {
                "id": c.id,
                "name": c.function.name,
                "arguments": _arguments(c.function.arguments),
            }
            for c in msg.tool_calls
        ]
    if getattr(msg, "name", None) is not None:
        out["name"] = msg.name  # templates that have a place for it use it; others ignore it
    return out


def _arguments(args: Any) -> Any:
    """A past call's ``arguments`` (a JSON string on the wire) as the JSON value it holds."""
    if not isinstance(args, str):
        return args
    try:
        return json.loads(args)
    except json.JSONDecodeError as e:
        raise bad_request(
            f"tool call arguments are not valid JSON: {e}", "messages.tool_calls"
        ) from None


def _check_message(msg: Any, i: int, harmony: bool) -> None:
    """400 for a refused role or field (saying why) and for non-text content parts."""
    if isinstance(msg, FunctionMessage):
        raise bad_request(
            f"role 'function' is not supported: {REFUSED_ROLES['function']}",
            f"messages.{i}.role",
        )
    if harmony and i > 0 and isinstance(msg, SystemMessage):
        raise bad_request(
            f"a {msg.role} message is only allowed first for this model (GPT-OSS's harmony "
            "template renders the first system or developer message as its instructions)",
            f"messages.{i}.role",
        )
    for name in ("function_call", "audio"):
        if isinstance(msg, AssistantMessage) and getattr(msg, name) is not None:
            refuse(name, MESSAGE_FIELDS, f"messages.{i}.{name}")
    if not isinstance(msg.content, list):
        return
    allowed = ("text", "refusal") if isinstance(msg, AssistantMessage) else ("text",)
    for j, part in enumerate(msg.content):
        field = part.type if part.type in allowed else None
        if field is None or not isinstance(getattr(part, field), str):
            raise bad_request(
                f"content parts of type {part.type!r} are not supported (text only)"
                if field is None
                else f"a {field!r} content part needs a string {field!r}",
                f"messages.{i}.content.{j}",
            )


def content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(getattr(p, "text", None) or getattr(p, "refusal", "") for p in content)


def _pass_reasoning(messages: list[dict[str, Any]], sent: list[Any], template: str) -> None:
    """An assistant message's ``reasoning_content`` (what this server returned) under the name
    the template reads (GPT-OSS: ``thinking``; Qwen3: ``reasoning_content``); a template that
    reads neither does not show past reasoning, as the model's own chat format drops it."""
    for out, msg in zip(messages, sent, strict=True):
        text = getattr(msg, "reasoning_content", None)
        for name in ("thinking", "reasoning_content"):
            if text and (f".{name}" in template or f"'{name}'" in template):
                out[name] = text
