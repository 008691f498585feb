"""The tools as the prompt shows them, for chat templates that do not render them: the tool
instructions as a system prompt (SmolLM2's convention)."""

from __future__ import annotations

import json

from stencil.api.openai.protocol import Tool

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
