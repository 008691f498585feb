"""The tools and past tool calls as the prompt shows them, in the served model's format.

Templates that render ``tools`` get them as the ``tools`` argument (GPT-OSS's with every
description, as openai-harmony writes it); Phi-4-mini's as a JSON string in the system message;
a template that renders no tools gets the tool instructions as a system prompt (SmolLM2's
convention). A past call is passed as a call where the template reads ``tool_calls`` (arguments
a mapping, transformers' convention), else written into the assistant's text as the model
writes it; call ids as the template takes them.
"""

from __future__ import annotations

import json
from typing import Any

from stencil.api.openai.protocol import Tool
from stencil.api.tools.formats import ToolCallFormat

_SYSTEM_TOOLS = (  # close to the prompt SmolLM2 was tuned on for tool calls
    "You are an expert in composing functions. You are given a question and a set of possible "
    "functions. Based on the question, you will need to make one or more function/tool calls to "
    "achieve the purpose. If none of the functions can be used, answer in plain text.\n\n"
    "You have access to the following tools:\n<tools>{tools}</tools>\n\n"
    "To call tools, the output MUST strictly adhere to the following format:\n"
    "<tool_call>[\n"
    '{{"name": "func_name1", "arguments": {{"argument1": "value1", "argument2": "value2"}}}},\n'
    "... (more tool calls as required)\n]</tool_call>"
)


def prompt_with_tools(
    messages: list[dict[str, Any]],
    offered: tuple[Tool, ...],
    fmt: ToolCallFormat,
    *,
    template: str,
    harmony: bool,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """``(messages, tools)`` for the chat template: the messages with their past calls and
    call ids in ``fmt`` (new dicts), and the ``tools`` argument (None where the tools went
    into the messages, or none are offered)."""
    native_calls = "tool_calls" in template
    out = [_with_past_calls(m, fmt, native_calls) for m in messages]
    tools = [t.model_dump(exclude_none=True) for t in offered] or None
    if tools and harmony:
        tools = [t | {"function": {"description": "", **t["function"]}} for t in tools]
    if tools and fmt.system_tools:  # Phi-4-mini: a JSON string in the system message
        specs = [t.function.model_dump(exclude_none=True) for t in offered]
        return _with_system_tools(out, json.dumps(specs, ensure_ascii=False)), None
    if tools and "tools" not in template:
        return _with_system_prompt(out, tools_system_prompt(offered)), None
    return out, tools


def tools_system_prompt(tools: tuple[Tool, ...]) -> str:
    """The tool instructions for templates that do not render ``tools`` themselves."""
    specs = [t.function.model_dump(exclude_none=True) for t in tools]
    return _SYSTEM_TOOLS.format(tools=json.dumps(specs, ensure_ascii=False))


def _with_past_calls(msg: dict[str, Any], fmt: ToolCallFormat, native: bool) -> dict[str, Any]:
    if msg["role"] == "tool":
        return msg | {"tool_call_id": history_call_id(fmt, msg["tool_call_id"])}
    calls = msg.get("tool_calls")
    if not calls:
        return msg
    if native:
        native_calls = [
            {
                "type": "function",
                "id": history_call_id(fmt, c["id"]),
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for c in calls
        ]
        return msg | {"tool_calls": native_calls}
    text = msg["content"]
    rest = {k: v for k, v in msg.items() if k != "tool_calls"}
    return rest | {"content": (text + "\n" if text else "") + render_calls(fmt, calls)}


def render_calls(fmt: ToolCallFormat, calls: list[dict[str, Any]]) -> str:
    """Past ``{"name", "arguments"}`` calls as the model writes them in ``fmt`` (for templates
    that show an assistant's calls only as its text)."""
    if fmt.array:
        calls = [{"name": c["name"], fmt.args_key: c["arguments"]} for c in calls]
        return f"{fmt.open}{json.dumps(calls, ensure_ascii=False)}{fmt.close}"
    blocks = [
        f"{fmt.open}{json.dumps({'name': c['name'], fmt.args_key: c['arguments']})}{fmt.close}"
        for c in calls
    ]
    return fmt.separator.join(blocks)


def history_call_id(fmt: ToolCallFormat, call_id: str | None) -> str | None:
    """A past call's id as the template takes it: Mistral's are 9 characters, so longer ids
    (this server's ``call_...``) keep their last 9, as vLLM does."""
    n = fmt.call_id_chars
    return call_id[-n:] if n and call_id and len(call_id) > n else call_id


def _with_system_tools(messages: list[dict[str, Any]], tools: str) -> list[dict[str, Any]]:
    if messages and messages[0]["role"] == "system":
        return [dict(messages[0], tools=tools), *messages[1:]]
    return [{"role": "system", "content": "", "tools": tools}, *messages]


def _with_system_prompt(messages: list[dict[str, Any]], prompt: str) -> list[dict[str, Any]]:
    if messages and messages[0]["role"] == "system":
        first = dict(messages[0], content=f"{messages[0]['content']}\n\n{prompt}")
        return [first, *messages[1:]]
    return [{"role": "system", "content": prompt}, *messages]
