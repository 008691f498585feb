"""GPT-OSS's harmony format: detection, and the constraint over a harmony reply.

A reply is a sequence of messages, each ``<|channel|>CHANNEL[ to=RECIPIENT][ <|constrain|>TYPE]
<|message|>TEXT`` ended by ``<|end|>`` (then ``<|start|>assistant`` opens the next) or by one of
the stop tokens ``<|return|>`` (after the ``final`` answer) and ``<|call|>`` (after a tool call).
``analysis`` holds the reasoning, ``commentary`` preambles and tool calls (``to=functions.NAME``,
JSON arguments), ``final`` the answer. The prompt is the model's own chat template (it renders
the system / developer / user turns, the tools as a TypeScript namespace and past calls); the
reply is parsed by ``harmony_parser``.

Constraints: a response format applies to the ``final`` channel only: the engine starts the
matcher once :data:`FINAL_MARKER` is in the output (``SamplingParams.reasoning_end``), so the
analysis is free. Tools are a grammar over the whole reply: free analysis / preamble messages,
then the call (forced) or the call or a free final answer (``auto``), its arguments the tool's
parameters schema.
"""

from __future__ import annotations

import json
from typing import Any

from stencil.api.openai.protocol import Tool

FINAL_MARKER = "<|channel|>final<|message|>"
SPECIALS = ("<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>")
STOPS = ("<|return|>", "<|call|>")
_TEXT = "TEXT: /(.|\\n)*/"


def harmony_tokens(tokenizer: Any) -> dict[str, int] | None:
    """The harmony special tokens of ``tokenizer`` (text -> id) when its chat template writes
    harmony (it opens channels), else None."""
    template = getattr(tokenizer, "chat_template", None)
    if not isinstance(template, str) or "<|channel|>" not in template:
        return None
    wanted = set(SPECIALS + STOPS)
    found = {}
    for token_id, added in (getattr(tokenizer, "added_tokens_decoder", None) or {}).items():
        if added.content in wanted:
            found[added.content] = int(token_id)
    return found if set(SPECIALS) <= found.keys() else None


def tool_grammar(
    tools: list[Tool], *, auto: bool, tokens: dict[str, int], answer: bool = False
) -> tuple[str, dict[str, Any]]:
    """``(lark, json_rules)`` for ``Constraint.grammar``: an optional ``analysis`` message and
    an optional ``commentary`` preamble (free text), then one call to one of ``tools`` (harmony
    ends the turn at ``<|call|>``: one call per reply) or, in ``auto``, a ``final`` answer:
    free text, or with ``answer`` the rule ``answer`` (``Constraint.calls_or_answer``: the
    response format). One message per channel keeps a close near ``max_tokens`` short."""

    def tok(text: str) -> str:
        return f"<[{tokens[text]}]>"

    ch, msg = tok("<|channel|>"), tok("<|message|>")
    calls, rules = [], {}
    for i, tool in enumerate(tools):
        name = f"args{i}"
        rules[name] = tool.function.parameters or {"type": "object", "properties": {}}
        head = json.dumps(f"{tool.function.name} ")
        calls.append(f'{head} {tok("<|constrain|>")} "json" {msg} {name}')
    then = f'TEXT {tok("<|end|>")} {tok("<|start|>")} "assistant"'
    lines = [
        "start: analysis? preamble? " + ("(final | call)" if auto else "call"),
        f'analysis: {ch} "analysis" {msg} {then}',
        f'preamble: {ch} "commentary" {msg} {then}',
        f'call: {ch} "commentary to=functions." ({" | ".join(calls)})',
        _TEXT,
    ]
    if auto:
        lines.append(f'final: {ch} "final" {msg} {"answer" if answer else "TEXT"}')
    return "%llguidance {}\n" + "\n".join(lines) + "\n", rules
