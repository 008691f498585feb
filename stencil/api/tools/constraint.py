"""The constraint of a request with tools: the family's call syntax (forced, or after text in
``auto``), or, in ``auto`` beside a JSON response format, the calls or the answer
(``Constraint.calls_or_answer``). Forced calls leave the response format out: it describes the
answer, and such a turn has none."""

from __future__ import annotations

from stencil.api.errors import bad_request
from stencil.api.openai.structured_output import Grounding, Source
from stencil.api.tools.formats import SMOLLM2, ToolCallFormat
from stencil.api.tools.harmony import tool_grammar
from stencil.api.tools.plan import ToolPlan
from stencil.api.tools.schema import calls_schema

_ANSWER_KINDS = ("json", "json_object")


def tool_sources(
    sources: list[Source],
    plan: ToolPlan,
    fmt: ToolCallFormat,
    tokens: dict[str, int],
    harmony: dict[str, int] | None = None,
    grounding: Grounding | None = None,
) -> list[Source]:
    """The request's constraints once its tools are planned. Forced calls (``required``,
    named) are the whole turn: a JSON answer format (``response_format``, ``guided_json``,
    ``structured_outputs.json``) is not this turn's business and is left out. In ``auto`` a JSON
    answer format and the calls become one constraint: the calls or the answer
    (``answer_source``). A regex, choice or grammar constraint stays a second constraint (a
    400)."""
    answers = [s for s in sources if s.kind in _ANSWER_KINDS]
    others = [s for s in sources if s.kind not in _ANSWER_KINDS]
    if plan.mode == "forced":
        return [*others, _tool_source(plan, fmt, tokens, harmony)]
    if others:
        raise bad_request(
            f"{others[0].param} cannot be combined with tools in tool_choice 'auto': only a "
            "JSON answer format can (response_format, guided_json, structured_outputs.json); "
            "use tool_choice 'none' or 'required'",
            "tool_choice",
        )
    if len(answers) > 1:
        return answers  # two constraints: the 400 of ``openai.constraint.single_constraint``
    return (
        [answer_source(answers[0], plan, fmt, tokens, harmony, grounding)]
        if answers
        else [_tool_source(plan, fmt, tokens, harmony)]
    )


def answer_source(
    answer: Source,
    plan: ToolPlan,
    fmt: ToolCallFormat,
    tokens: dict[str, int],
    harmony: dict[str, int] | None = None,
    grounding: Grounding | None = None,
) -> Source:
    """``tool_choice: "auto"`` with a JSON answer format: the family's call syntax or the
    answer (harmony: the calls or a ``final`` message holding the answer), one grammar."""
    if grounding is not None:
        raise bad_request(
            "structured_outputs.source_text grounds a whole output; it cannot be combined "
            "with tools in tool_choice 'auto'",
            "structured_outputs.source_text",
        )
    tools = list(plan.tools)
    if harmony is not None:
        union = tool_grammar(tools, auto=True, tokens=harmony, answer=True)
        calls, _ = tool_grammar(tools, auto=False, tokens=harmony)
        after = harmony["<|message|>"]
        lark, rules = union
    else:
        lark, calls, rules = fmt.calls_or_answer_grammar(tools, single=plan.single, tokens=tokens)
        after = None
    return Source(answer.param, "calls_or_answer", (lark, rules, answer, calls, after))


def _tool_source(
    plan: ToolPlan,
    fmt: ToolCallFormat,
    tokens: dict[str, int],
    harmony: dict[str, int] | None = None,
) -> Source:
    """The tools' constraint: SmolLM2's forced calls are the bare JSON array; harmony's a
    grammar over the whole reply (``harmony``); every other case is the family's call syntax
    (``formats``), alone (forced) or after text (auto)."""
    param = "tool_choice" if plan.mode == "forced" else "tools"
    if harmony is not None:
        grammar = tool_grammar(list(plan.tools), auto=plan.mode == "auto", tokens=harmony)
        return Source(param, "tool_calls", grammar)
    if plan.mode == "forced" and fmt is SMOLLM2:
        return Source(param, "json", calls_schema(list(plan.tools), single=plan.single))
    grammar = fmt.grammar(
        list(plan.tools), auto=plan.mode == "auto", single=plan.single, tokens=tokens
    )
    return Source(param, "tool_calls", grammar)
