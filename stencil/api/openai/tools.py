"""Tool calling: how tools reach the prompt, the schema that constrains calls, and call parsing.

The wire format follows SmolLM2's (and Hermes') convention: a call is
``<tool_call>[{"name": ..., "arguments": {...}}]</tool_call>``. For ``required`` and named
``tool_choice`` the whole output is constrained to the JSON array (no tags); for ``auto`` the model
writes text freely and, once it writes ``<tool_call>``, the array is generated under the same
constraint in a second, constrained step (see ``server``).
"""

from __future__ import annotations

import copy
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

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"


@dataclass(slots=True, frozen=True)
class ToolPlan:
    """How one request uses its tools. ``mode``: "forced" (required/named) or "auto"."""

    mode: str
    schema: dict[str, Any]
    tool_names: tuple[str, ...]


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
    return ToolPlan(mode=mode, schema=schema, tool_names=tuple(t.function.name for t in chosen))


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


# ---- the constraint ---------------------------------------------------------------------------


def calls_schema(tools: list[Tool], *, single: bool) -> dict[str, Any]:
    """A JSON Schema for ``[{"name": N, "arguments": {...}}, ...]`` over ``tools``."""
    defs: dict[str, Any] = {}
    variants = []
    for i, tool in enumerate(tools):
        params = tool.function.parameters or {"type": "object", "properties": {}}
        args = relocate_schema(params, f"tool{i}_", defs)
        variants.append(
            {
                "type": "object",
                "properties": {"name": {"const": tool.function.name}, "arguments": args},
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
        )
    item = variants[0] if len(variants) == 1 else {"anyOf": variants}
    schema: dict[str, Any] = {"type": "array", "items": item, "minItems": 1}
    if single:
        schema["maxItems"] = 1
    if defs:
        schema["$defs"] = defs
    return schema


def relocate_schema(schema: dict[str, Any], prefix: str, defs: dict[str, Any]) -> dict[str, Any]:
    """Return ``schema`` made embeddable: its ``$defs``/``definitions`` move into ``defs`` under
    ``prefix`` and every local ``$ref`` is rewritten to match. A ref to the root (``#``) or to
    another pointer inside it makes the whole schema a def of its own."""
    schema = copy.deepcopy(schema)
    for key in ("$schema", "$id"):
        schema.pop(key, None)
    local: dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        for name, sub in (schema.pop(key, None) or {}).items():
            local[f"#/{key}/{name}"] = (f"{prefix}{name}", sub)
    root_name = f"{prefix}root"
    uses_root = [False]

    def rewrite(node: Any) -> Any:
        if isinstance(node, dict):
            out = {k: rewrite(v) for k, v in node.items()}
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#"):
                out["$ref"] = _rewrite_ref(ref, local, root_name, uses_root)
            return out
        if isinstance(node, list):
            return [rewrite(v) for v in node]
        return node

    body = rewrite(schema)
    for new_name, sub in local.values():
        defs[new_name] = rewrite(sub)
    if uses_root[0]:
        defs[root_name] = body
        return {"$ref": f"#/$defs/{root_name}"}
    return body


def _rewrite_ref(
    ref: str, local: dict[str, tuple[str, Any]], root_name: str, uses_root: list[bool]
) -> str:
    for old, (new_name, _) in local.items():
        if ref == old or ref.startswith(old + "/"):
            return f"#/$defs/{new_name}{ref[len(old) :]}"
    uses_root[0] = True
    return f"#/$defs/{root_name}{ref[1:]}"


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


def render_tool_calls(msg: AssistantMessage) -> str:
    """An assistant message's past tool calls as the text the model would have written."""
    calls = []
    for tc in msg.tool_calls or []:
        args = tc.function.arguments
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError as e:
                raise bad_request(
                    f"tool call arguments are not valid JSON: {e}", "messages.tool_calls"
                ) from None
        calls.append({"name": tc.function.name, "arguments": args})
    return f"{TOOL_CALL_OPEN}{json.dumps(calls, ensure_ascii=False)}{TOOL_CALL_CLOSE}"


# ---- parsing ----------------------------------------------------------------------------------


def parse_calls(text: str) -> list[dict[str, Any]] | None:
    """Parse the constrained call array into OpenAI ``tool_calls``; None if it is not complete."""
    text = text.strip()
    if text.startswith(TOOL_CALL_OPEN):
        text = text[len(TOOL_CALL_OPEN) :]
    if text.endswith(TOOL_CALL_CLOSE):
        text = text[: -len(TOOL_CALL_CLOSE)]
    try:
        calls = json.loads(text)
    except json.JSONDecodeError:
        return None
    if isinstance(calls, dict):
        calls = [calls]
    if not isinstance(calls, list) or not calls:
        return None
    out = []
    for call in calls:
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            return None
        out.append(
            {
                "id": new_call_id(),
                "type": "function",
                "function": {
                    "name": call["name"],
                    "arguments": json.dumps(call.get("arguments", {}), ensure_ascii=False),
                },
            }
        )
    return out


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def split_tool_text(text: str) -> tuple[str, bool]:
    """For ``auto``: the text safe to emit and whether a call has started.

    Returns (prefix, started). When ``started`` is False, a tail that could still grow into
    ``<tool_call>`` is held back from ``prefix``.
    """
    at = text.find(TOOL_CALL_OPEN)
    if at >= 0:
        return text[:at], True
    for k in range(min(len(TOOL_CALL_OPEN) - 1, len(text)), 0, -1):
        if TOOL_CALL_OPEN.startswith(text[-k:]):
            return text[:-k], False
    return text, False
