"""The compiler's first stage: ``translate``, a ``Constraint`` -> its llguidance grammar.

One function for every kind and every caller: JSON schemas go through ``json_schema`` (and
``grounding`` when the constraint grounds strings, numbers or dates in a source text); regexes,
choices and Lark / GBNF grammars through ``llg.text_grammars``. The compiler runs it inside its
killable compile worker (or its bounded thread with no workers); nothing else translates.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from . import grounding, json_schema
from .errors import ConstraintError, ConstraintTooLargeError
from .grounding.document_index import DocumentIndex
from .json_schema import document
from .limits import Limits
from .llg import text_grammars
from .llg.regex_check import check_regex
from .llg.whitespace import guidance_options
from .spec import Constraint


@dataclass(frozen=True, slots=True)
class Translation:
    """What a constraint translates to."""

    grammar: str
    """The llguidance grammar the matcher template is built from."""
    warnings: tuple[str, ...] = ()
    checks: tuple[tuple[str, str], ...] = ()
    """JSON schemas: ``(pointer, keyword)`` of the keywords checked as values complete."""
    draft: int = 2020
    """JSON schemas: the draft the schema is read by."""
    spans: tuple[bytes, ...] = ()
    """Grounded JSON: the marked text of each co-matched grounded string (``grounding``)."""
    branches: tuple[str, ...] = ()
    """``calls_or_answer`` whose answer has checks: the grammars of the calls alone and of the
    answer alone (the matcher follows each to tell the branches apart)."""


def translate(constraint: Constraint) -> Translation:
    """Translate ``constraint`` within its limits; raises a ``ConstraintError`` subclass."""
    limits, options = constraint.limits, dict(constraint.options)
    if constraint.kind == "json":
        return _json(constraint.source, limits, **options)
    if constraint.kind == "regex":
        return Translation(text_grammars.regex_grammar(constraint.source, limits))
    if constraint.kind == "choice":
        return Translation(text_grammars.choice_grammar(json.loads(constraint.source), limits))
    rules = json.loads(options.get("json_rules", "{}"))
    rules = {name: _rule_schema(schema, limits) for name, schema in rules.items()}
    answer = constraint.answer
    if answer is None:
        return Translation(text_grammars.lark_grammar(constraint.source, limits, rules))
    return _calls_or_answer(constraint.source, rules, answer, options["calls_only"], limits)


def _calls_or_answer(
    lark: str, rules: dict[str, Any], answer: Constraint, calls_only: str, limits: Limits
) -> Translation:
    """The union grammar, its ``answer`` rule the answer's translated schema (``%json``);
    with checks, the grammars of the two branches alone, for the matcher that applies them."""
    options = dict(answer.options)
    if options["whitespace_pattern"] is not None:
        check_regex(options["whitespace_pattern"], limits, "whitespace_pattern")
    loaded, _ = document.load(answer.source, limits)
    if grounding.uses_grounding(loaded):
        raise ConstraintError(
            "the answer marks strings x-grounded; an answer beside tool calls is not grounded"
        )
    prepared = _prepare(loaded, limits, **options)
    union = text_grammars.lark_grammar(lark, limits, {**rules, "answer": prepared.schema})
    branches: tuple[str, ...] = ()
    if prepared.checks:
        alone = {"calls": _probe(calls_only), "answer": _probe("start: answer\n")}
        both = {**rules, "answer": prepared.schema, "probe_lead": _PROBE_LEAD}
        branches = tuple(text_grammars.lark_grammar(g, limits, both) for g in alone.values())
    return Translation(union, prepared.warnings, prepared.checks, prepared.draft, (), branches)


_PROBE_LEAD = {"const": "\u0000"}
"""A ``%json`` alternative no output of the union takes. Where the union's branches are both
``%json`` sub-grammars from the output's start (``llama3_json``: bare JSON calls or a JSON
answer), llguidance lets JSON whitespace lead the output; a branch alone beside this
alternative does the same, so each branch's matcher takes what the union takes."""


def _probe(lark: str) -> str:
    """``lark`` (its rule ``start`` renamed) beside ``probe_lead``."""
    body = re.sub(r"^start:", "probe_start:", lark, count=1, flags=re.MULTILINE)
    return f"{body}\nstart: probe_start | probe_lead\n"


def _json(
    source: str,
    limits: Limits,
    *,
    allow_undeclared_properties: bool,
    whitespace: str | None,
    whitespace_pattern: str | None,
    source_text: str | None = None,
    ground_strings: bool = False,
    ground_numbers: bool = False,
    ground_dates: bool = False,
) -> Translation:
    if whitespace_pattern is not None:
        check_regex(whitespace_pattern, limits, "whitespace_pattern")
    loaded, _ = document.load(source, limits)
    marked, grounded = loaded, 0
    if source_text is not None:
        index = DocumentIndex(source_text)
        marked, grounded = grounding.mark_grounded(
            loaded,
            ground_strings=ground_strings,
            numbers=index.numbers if ground_numbers else None,
            dates=index.dates if ground_dates else None,
            readings=index.readings if ground_strings else (),
        )
    elif grounding.uses_grounding(loaded):
        raise ConstraintError("the schema marks strings x-grounded but no source text was given")
    prepared = _prepare(marked, limits, allow_undeclared_properties, whitespace, whitespace_pattern)
    grammar, spans = prepared.grammar, ()
    if grounded:
        lark, spans = grounding.grounded_lark(prepared.schema, source_text)
        grammar = text_grammars.validated_lark(lark, limits, "grounded schema")
    return Translation(grammar, prepared.warnings, prepared.checks, prepared.draft, spans)


def _prepare(
    loaded: Any,
    limits: Limits,
    allow_undeclared_properties: bool,
    whitespace: str | None,
    whitespace_pattern: str | None,
) -> json_schema.PreparedSchema:
    try:
        return json_schema.prepare(
            loaded,
            closed=not allow_undeclared_properties,
            guidance=guidance_options(whitespace, whitespace_pattern),
            limits=limits,
        )
    except RecursionError:
        raise ConstraintTooLargeError(
            "schema nesting exceeds the translator's recursion depth", "max_depth"
        ) from None


def _rule_schema(schema: Any, limits: Limits) -> dict[str, Any]:
    """One ``json_rules`` schema translated for llguidance's ``%json``."""
    loaded, _ = document.load(schema, limits)
    guidance = guidance_options("bounded", None)
    return json_schema.prepare(loaded, closed=True, guidance=guidance, limits=limits).schema
