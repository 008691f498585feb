"""Tool calling: which tools a request offers and how (``ToolPlan``), the tool prompt for chat
templates that do not render tools (SmolLM2's convention), and OpenAI ``tool_calls`` objects.

The call syntax of each model family, its constraint and its parser are in ``tool_formats``.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from stencil.api.errors import bad_request
from stencil.api.openai.protocol import (
    AllowedToolChoice,
    AssistantMessage,
    NamedCustomToolChoice,
    NamedToolChoice,
    Tool,
)
from stencil.api.openai.tool_schema import calls_schema


@dataclass(slots=True, frozen=True)
class ToolPlan:
    """How one request uses its tools. ``mode``: "forced" (required/named) or "auto"."""

    mode: str
    schema: dict[str, Any]
    tool_names: tuple[str, ...]
    tools: tuple[Tool, ...] = ()
    single: bool = False


def function_tools(tools: list[Any] | None) -> list[Tool]:
    """The request's tools, all of type ``function``; a custom tool is a 400 saying why."""
    for i, t in enumerate(tools or []):
        if not isinstance(t, Tool):
            raise bad_request(
                f"tools.{i} is a {t.type!r} tool; only function tools are supported (custom "
                "tools take free-form text this server cannot constrain)",
                f"tools.{i}.type",
            )
    return list(tools or [])


def plan_tools(
    tools: list[Tool] | None, tool_choice: Any, parallel_tool_calls: bool
) -> ToolPlan | None:
    """Resolve ``tools`` + ``tool_choice`` into a plan, or None when no call can happen."""
    if isinstance(tool_choice, NamedCustomToolChoice):
        raise bad_request(
            "tool_choice of type 'custom' is not supported: only function tools are",
            "tool_choice.type",
        )
    if not tools:
        if tool_choice not in (None, "none"):
            raise bad_request("tool_choice needs a non-empty tools list", "tool_choice")
        return None
    _check_unique_names(tools)
    if tool_choice is None:
        tool_choice = "auto"
    if tool_choice == "none":
        return None
    chosen = tools
    if isinstance(tool_choice, NamedToolChoice):
        chosen = _pick(tools, [tool_choice.function.name], "tool_choice")
    elif isinstance(tool_choice, AllowedToolChoice):
        names = [c.function.name for c in tool_choice.allowed_tools.tools]
        chosen = _pick(tools, names, "tool_choice.allowed_tools.tools")
        tool_choice = tool_choice.allowed_tools.mode
    single = isinstance(tool_choice, NamedToolChoice) or not parallel_tool_calls
    mode = "auto" if tool_choice == "auto" else "forced"
    schema = calls_schema(chosen, single=single)
    names = tuple(t.function.name for t in chosen)
    return ToolPlan(mode, schema, names, tuple(chosen), single)


def _pick(tools: list[Tool], names: list[str], param: str) -> list[Tool]:
    by_name = {t.function.name: t for t in tools}
    for name in names:
        if name not in by_name:
            raise bad_request(f"{param} names function {name!r}, which is not in tools", param)
    return [by_name[n] for n in dict.fromkeys(names)]


def _check_unique_names(tools: list[Tool]) -> None:
    seen: set[str] = set()
    for i, t in enumerate(tools):
        if t.function.name in seen:
            raise bad_request(
                f"duplicate tool name {t.function.name!r}", f"tools.{i}.function.name"
            )
        seen.add(t.function.name)


# ---- the prompt -------------------------------------------------------------------------------

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


def tools_system_prompt(tools: list[Tool]) -> str:
    """The tool instructions for templates that do not render ``tools`` themselves."""
    specs = [t.function.model_dump(exclude_none=True) for t in tools]
    return _SYSTEM_TOOLS.format(tools=json.dumps(specs, ensure_ascii=False))


def render_tool_calls(msg: AssistantMessage, fmt: Any) -> str:
    """An assistant message's past tool calls as the text the model would have written in
    ``fmt`` (a ``tool_formats.ToolCallFormat``)."""
    calls = [
        {"name": tc.function.name, "arguments": call_arguments(tc.function.arguments)}
        for tc in msg.tool_calls or []
    ]
    return fmt.render_calls(calls)


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
