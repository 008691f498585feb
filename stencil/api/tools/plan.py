"""Which tools a request offers and how (``ToolPlan``): ``tools`` + ``tool_choice`` +
``parallel_tool_calls`` resolved once, before the prompt is rendered."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stencil.api.errors import bad_request
from stencil.api.openai.protocol import (
    AllowedToolChoice,
    NamedCustomToolChoice,
    NamedToolChoice,
    Tool,
)


@dataclass(slots=True, frozen=True)
class ToolPlan:
    """How one request uses its tools. ``mode``: "forced" (required/named) or "auto"."""

    mode: str
    tool_names: tuple[str, ...]
    tools: tuple[Tool, ...] = ()  # the chosen tools, in tool_choice's order
    single: bool = False
    offered: tuple[Tool, ...] = ()  # the chosen tools in the request's order (the prompt's)


def _function_tools(tools: list[Any] | None) -> list[Tool]:
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
    tools: list[Any] | None, tool_choice: Any, parallel_tool_calls: bool
) -> ToolPlan | None:
    """Resolve ``tools`` + ``tool_choice`` into a plan, or None when no call can happen."""
    tools = _function_tools(tools)
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
    names = tuple(t.function.name for t in chosen)
    offered = tuple(t for t in tools if t.function.name in names)
    return ToolPlan(mode, names, tuple(chosen), single, offered)


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
