"""Chat messages -> the prompt text, through the served model's chat template.

Each message's fields are checked here (a refused role or field is a 400 saying why), a message
``name`` is passed on (templates that have a place for it use it), and tools are rendered natively
when the template reads ``tools``, else as a system prompt in SmolLM2's / Hermes' format.
"""

from __future__ import annotations

import json
from typing import Any

from stencil.api.errors import bad_request
from stencil.api.openai.protocol import (
    AssistantMessage,
    ChatCompletionRequest,
    FunctionMessage,
    SystemMessage,
    ToolMessage,
)
from stencil.api.openai.surface import MESSAGE_FIELDS, REFUSED_ROLES, check_chat_surface, refuse
from stencil.api.tools.calls import call_arguments
from stencil.api.tools.formats import SMOLLM2, ToolCallFormat
from stencil.api.tools.plan import ToolPlan, function_tools
from stencil.api.tools.prompt import tools_system_prompt

_NO_SYSTEM_ROLE = "System role not supported"  # Gemma 2's template raises this
_RESERVED_TEMPLATE_KWARGS = {
    "messages",
    "conversation",
    "tools",
    "tokenize",
    "add_generation_prompt",
    "continue_final_message",
    "return_dict",
}


def render_chat(
    req: ChatCompletionRequest,
    tokenizer: Any,
    plan: ToolPlan | None,
    max_len: int | None = None,
    fmt: ToolCallFormat = SMOLLM2,
    harmony: bool = False,
) -> str:
    """Render ``messages`` (and the tools, when they will be used) with the chat template;
    past calls' ids as ``fmt``'s template takes them. More messages than ``max_len`` (each
    renders to at least one token) is a 400 at once. ``harmony``: GPT-OSS's template, which
    writes every tool's description (an absent one is empty, as openai-harmony renders it)."""
    if max_len is not None and len(req.messages) > max_len:
        raise bad_request(
            f"{len(req.messages)} messages cannot fit in this model's context of {max_len} tokens",
            "messages",
        )
    template = getattr(tokenizer, "chat_template", None) or ""
    if not template:
        raise bad_request("the served model has no chat template; use /v1/completions", "messages")
    native_tools = "tools" in template
    native_calls = "tool_calls" in template
    for i, m in enumerate(req.messages):
        _check_message(m, i)
    messages = [_message_dict(m, native_calls, fmt) for m in req.messages]
    _pass_reasoning(messages, req.messages, template)
    kwargs = dict(req.chat_template_kwargs or {})
    clash = sorted(_RESERVED_TEMPLATE_KWARGS & kwargs.keys())
    if clash:
        raise bad_request(f"chat_template_kwargs may not set {clash}", "chat_template_kwargs")
    kwargs.update(check_chat_surface(req, template))
    offered = [t for t in function_tools(req.tools) if plan and t.function.name in plan.tool_names]
    tools = [t.model_dump(exclude_none=True) for t in offered] or None
    if tools and harmony:
        tools = [t | {"function": {"description": "", **t["function"]}} for t in tools]
    if tools and fmt.system_tools:  # Phi-4-mini: a JSON string in the system message
        specs = [t.function.model_dump(exclude_none=True) for t in offered]
        messages = _with_system_tools(messages, json.dumps(specs, ensure_ascii=False))
        tools = None
    elif tools and not native_tools:
        messages = _with_tool_system_prompt(messages, tools_system_prompt(offered))
        tools = None
    if _NO_SYSTEM_ROLE in template:
        messages = _fold_system(messages)
    try:
        return tokenizer.apply_chat_template(
            messages,
            tools=tools,
            add_generation_prompt=req.add_generation_prompt,
            continue_final_message=req.continue_final_message,
            tokenize=False,
            **kwargs,
        )
    except Exception as e:  # jinja errors, template raise_exception(), bad kwargs
        raise bad_request(f"the chat template could not render messages: {e}", "messages") from None


def _message_dict(msg: Any, native_calls: bool, fmt: ToolCallFormat) -> dict[str, Any]:
    out = _message_body(msg, native_calls, fmt)
    if getattr(msg, "name", None) is not None:
        out["name"] = msg.name  # templates that have a place for it use it; others ignore it
    return out


def _message_body(msg: Any, native_calls: bool, fmt: ToolCallFormat) -> dict[str, Any]:
    if isinstance(msg, SystemMessage):
        return {"role": "system", "content": content_text(msg.content)}
    if isinstance(msg, ToolMessage):
        return {
            "role": "tool",
            "content": content_text(msg.content),
            "tool_call_id": fmt.history_call_id(msg.tool_call_id),
        }
    if isinstance(msg, AssistantMessage):
        text = content_text(msg.content)
        if msg.tool_calls and native_calls:
            calls = [  # templates read arguments as a mapping (transformers' convention)
                {
                    "type": "function",
                    "id": fmt.history_call_id(c.id),
                    "function": {
                        "name": c.function.name,
                        "arguments": call_arguments(c.function.arguments),
                    },
                }
                for c in msg.tool_calls
            ]
            return {"role": "assistant", "content": text, "tool_calls": calls}
        if msg.tool_calls:
            past = [
                {"name": c.function.name, "arguments": call_arguments(c.function.arguments)}
                for c in msg.tool_calls
            ]
            text = (text + "\n" if text else "") + fmt.render_calls(past)
        return {"role": "assistant", "content": text}
    return {"role": msg.role, "content": content_text(msg.content)}


def _check_message(msg: Any, i: int) -> None:
    """400 for a refused role or field (saying why) and for non-text content parts."""
    if isinstance(msg, FunctionMessage):
        raise bad_request(
            f"role 'function' is not supported: {REFUSED_ROLES['function']}",
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


def _fold_system(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A leading system message as the start of the first user turn (Gemma 3's template does
    this itself; Gemma 2's refuses a system message)."""
    if len(messages) < 2 or messages[0]["role"] != "system" or messages[1]["role"] != "user":
        return messages
    first = dict(messages[1], content=f"{messages[0]['content']}\n\n{messages[1]['content']}")
    return [first, *messages[2:]]


def _with_system_tools(messages: list[dict[str, Any]], tools: str) -> list[dict[str, Any]]:
    if messages and messages[0]["role"] == "system":
        return [dict(messages[0], tools=tools), *messages[1:]]
    return [{"role": "system", "content": "", "tools": tools}, *messages]


def _with_tool_system_prompt(messages: list[dict[str, Any]], prompt: str) -> list[dict[str, Any]]:
    if messages and messages[0]["role"] == "system":
        first = dict(messages[0], content=f"{messages[0]['content']}\n\n{prompt}")
        return [first, *messages[1:]]
    return [{"role": "system", "content": prompt}, *messages]
