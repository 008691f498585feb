"""A Responses API request in chat terms: its input items (after a stored conversation) become
chat messages, ``text.format`` the response format, flat function tools chat tools; then the
chat conversion (``convert_chat``) builds the one engine request, so both APIs share the
prompt rendering, the constraint compiler and every limit. Errors name the Responses field."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from stencil.api.errors import APIError, bad_request
from stencil.api.model_info import ModelInfo
from stencil.api.openai.convert import convert_chat
from stencil.api.openai.protocol import ChatCompletionRequest
from stencil.api.openai.validation import describe_validation_error
from stencil.api.request_plan import Plan
from stencil.api.responses_api.protocol import (
    FunctionCallItem,
    FunctionCallOutputItem,
    FunctionTool,
    MessageItem,
    ReasoningItem,
    ResponsesRequest,
)
from stencil.api.responses_api.surface import LOGPROBS_INCLUDE

BUILT_IN = "built-in tools (web search, file search, computer use, code interpreter, MCP, ...) "
NO_BUILT_IN = BUILT_IN + "are not available: this server runs the model only"
TEXT_PARTS = {"input_text": "text", "output_text": "text", "refusal": "refusal"}
ITEMS: dict[str, type[BaseModel]] = {
    "message": MessageItem,
    "function_call": FunctionCallItem,
    "function_call_output": FunctionCallOutputItem,
    "reasoning": ReasoningItem,
}
# Chat-side parameter names as the Responses API calls them (for the 400s convert_chat raises).
RENAMES = [
    (r"^response_format\.json_schema\.", "text.format."),
    (r"^response_format", "text.format"),
    (r"^max_completion_tokens|^max_tokens", "max_output_tokens"),
    (r"^messages", "input"),
    (r"^tools\.(\d+)\.function\.", r"tools.\1."),
    (r"^verbosity", "text.verbosity"),
    (r"^reasoning_effort", "reasoning.effort"),
    (r"^logprobs", "include"),
]


# the chat fields a Responses request's constraint can come from that the Responses API names
# otherwise (``tools`` and ``tool_choice`` keep their names), looked up without calling back
CONSTRAINT_PARAMS = {
    "response_format": "text.format",
    "response_format.json_schema.schema": "text.format.schema",
}


@dataclass(slots=True)
class Turn:
    """One request in chat terms: the engine plan, and the conversation so far (stored input
    messages, without ``instructions``) that this response's output will continue."""

    plan: Plan
    conversation: list[dict[str, Any]]
    logprobs: bool


def to_turn(req: ResponsesRequest, previous: list[dict[str, Any]], model: ModelInfo) -> Turn:
    """Convert (the request's surface already checked: ``surface``); raises APIError (400)
    naming the Responses field for anything not served."""
    new = input_messages(req.input, model.max_model_len)
    if not new and not previous:
        raise bad_request("input must not be empty", "input")
    conversation = previous + new
    _check_call_ids(conversation)
    system = [{"role": "system", "content": req.instructions}] if req.instructions else []
    logprobs = req.top_logprobs is not None or LOGPROBS_INCLUDE in (req.include or [])
    chat: dict[str, Any] = {
        "messages": system + conversation,
        "max_completion_tokens": req.max_output_tokens,
        "temperature": req.temperature,
        "top_p": req.top_p,
        "logprobs": logprobs,
        "top_logprobs": req.top_logprobs,
        "tools": [_chat_tool(t, i) for i, t in enumerate(req.tools or [])] or None,
        "tool_choice": _tool_choice(req.tool_choice),
        "parallel_tool_calls": req.parallel_tool_calls is not False and req.max_tool_calls != 1,
        "response_format": _response_format(req),
        "verbosity": req.text.verbosity if req.text else None,
        "reasoning_effort": req.reasoning.effort if req.reasoning else None,
    }
    body = {k: v for k, v in chat.items() if v is not None}
    try:
        plan = convert_chat(_validated(ChatCompletionRequest, body, ""), model)
    except APIError as e:
        raise _renamed(e) from None
    plan.constraint_param = CONSTRAINT_PARAMS.get(plan.constraint_param, plan.constraint_param)
    return Turn(plan, conversation, logprobs)


def input_messages(
    value: str | list[dict[str, Any]] | None, max_items: int
) -> list[dict[str, Any]]:
    """``input`` as chat messages (function calls join the assistant message before them)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if len(value) > max_items:
        raise bad_request(
            f"input has {len(value)} items; this model's context of {max_items} tokens cannot "
            "hold them",
            "input",
        )
    out: list[dict[str, Any]] = []
    for i, raw in enumerate(value):
        item = _item(raw, f"input.{i}")
        if isinstance(item, MessageItem):
            out.append({"role": item.role, "content": _text(item.content, f"input.{i}.content")})
        elif isinstance(item, FunctionCallItem):
            call = {
                "id": item.call_id,
                "type": "function",
                "function": {"name": item.name, "arguments": item.arguments},
            }
            if out and out[-1]["role"] == "assistant":
                out[-1].setdefault("tool_calls", []).append(call)
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif isinstance(item, FunctionCallOutputItem):
            output = _text(item.output, f"input.{i}.output")
            out.append({"role": "tool", "tool_call_id": item.call_id, "content": output})
        # a reasoning item is history the template does not show again
    return out


def _item(raw: Any, where: str) -> BaseModel:
    if not isinstance(raw, dict):
        raise bad_request(f"{where} must be an object (an input item)", where)
    kind = raw.get("type", "message" if "role" in raw else None)
    if kind is None:
        raise bad_request(f"{where} has no type and no role: not an input item", f"{where}.type")
    if not isinstance(kind, str):
        raise bad_request(f"{where}.type must be a string", f"{where}.type")
    if kind == "item_reference":
        raise bad_request(
            f"{where} is an item reference: not supported; send the item itself or use "
            "previous_response_id",
            f"{where}.type",
        )
    if kind not in ITEMS:
        known = re.search(r"_call(_output)?$|^mcp_|^computer|^compaction|_file$", kind)
        why = NO_BUILT_IN if known else "served items: " + ", ".join(ITEMS)
        raise bad_request(f"{where} has item type {kind[:64]!r}: {why}", f"{where}.type")
    return _validated(ITEMS[kind], raw, where)


def _validated(cls: type[Any], body: dict[str, Any], where: str) -> Any:
    try:
        return cls.model_validate(body)
    except ValidationError as e:
        message, param = describe_validation_error(e)
        param = f"{where}.{param}" if where and param else (param or where or None)
        raise bad_request(f"{where}: {message}" if where else message, param) from None


def _text(content: str | list[dict[str, Any]], where: str) -> str:
    """A message's (or a call output's) text; parts other than text and refusal are a 400."""
    if isinstance(content, str):
        return content
    texts = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        key = TEXT_PARTS.get(kind) if isinstance(kind, str) else None
        if key is None or not isinstance(part.get(key), str):
            shown = kind[:64] if isinstance(kind, str) else kind
            raise bad_request(
                f"{where}.{j} is a {shown!r} part: only input_text, output_text and refusal "
                "parts are served (text models only)",
                f"{where}.{j}.type",
            )
        texts.append(part[key])
    return "".join(texts)


def _check_call_ids(messages: list[dict[str, Any]]) -> None:
    """Every function_call_output answers a function_call before it (as OpenAI checks)."""
    calls: set[str] = set()
    for m in messages:
        calls.update(c["id"] for c in m.get("tool_calls") or [])
        if m["role"] == "tool" and m["tool_call_id"] not in calls:
            raise bad_request(
                f"no function_call with call_id {m['tool_call_id'][:64]!r} comes before its "
                "function_call_output (in the input or the previous response)",
                "input",
            )


def _chat_tool(raw: dict[str, Any], i: int) -> dict[str, Any]:
    kind = raw.get("type") if isinstance(raw, dict) else None
    if kind != "function":
        shown = kind[:64] if isinstance(kind, str) else kind
        raise bad_request(f"tools.{i} is a {shown!r} tool: {NO_BUILT_IN}", f"tools.{i}.type")
    tool = _validated(FunctionTool, raw, f"tools.{i}")
    if tool.defer_loading:
        raise bad_request(
            "defer_loading is not supported: every function is offered to the model",
            f"tools.{i}.defer_loading",
        )
    fields = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
    fields["strict"] = tool.strict
    return {"type": "function", "function": {k: v for k, v in fields.items() if v is not None}}


def _tool_choice(choice: str | dict[str, Any] | None) -> Any:
    if choice is None or isinstance(choice, str):
        return choice  # none / auto / required (anything else: the chat check names it)
    kind = choice.get("type")
    if kind == "function":
        return {"type": "function", "function": {"name": choice.get("name")}}
    if kind == "allowed_tools":
        tools = choice.get("tools")
        named = [
            {"type": "function", "function": {"name": t.get("name")}}
            for t in (tools if isinstance(tools, list) else [])
            if isinstance(t, dict)
        ]
        return {
            "type": "allowed_tools",
            "allowed_tools": {"mode": choice.get("mode"), "tools": named},
        }
    shown = kind[:64] if isinstance(kind, str) else kind
    raise bad_request(f"tool_choice of type {shown!r}: {NO_BUILT_IN}", "tool_choice.type")


def _response_format(req: ResponsesRequest) -> dict[str, Any] | None:
    fmt = req.text.format if req.text else None
    if fmt is None or fmt.type != "json_schema":
        return {"type": fmt.type} if fmt is not None else None
    if fmt.schema_ is None:
        raise bad_request("text.format of type json_schema needs a schema", "text.format.schema")
    spec = {"name": fmt.name, "description": fmt.description, "schema": fmt.schema_}
    spec["strict"] = fmt.strict
    return {"type": "json_schema", "json_schema": {k: v for k, v in spec.items() if v is not None}}


def _rename(param: str | None) -> str | None:
    if param is None:
        return None
    for pattern, repl in RENAMES:
        new = re.sub(pattern, repl, param)
        if new != param:
            return new
    return param


def _renamed(e: APIError) -> APIError:
    e.param = _rename(e.param)
    return e
