"""Regex, choice and Lark/GBNF grammar texts -> validated llguidance grammars."""

from __future__ import annotations

import json

import llguidance
from llguidance.gbnf_to_lark import any_to_lark

from ..errors import ConstraintTooLargeError, InvalidGrammarError, InvalidRegexError
from ..limits import Limits
from .errors import grammar_error
from .limits import parser_limits
from .regex_check import check_regex, max_repetition


def regex_grammar(pattern: str, limits: Limits) -> str:
    if not isinstance(pattern, str):
        raise InvalidRegexError("a regex must be a string")
    check_regex(pattern, limits)
    return llguidance.LLMatcher.grammar_from_regex(pattern)


def choice_grammar(choices: list[str], limits: Limits) -> str:
    check_choices(choices, limits)
    unique = list(dict.fromkeys(choices))
    # One lexeme (a terminal), not parser alternatives: llguidance's Earley rows hold at most
    # 2,000 items, so a rule with more alternatives fails on its first token.
    alternatives = " | ".join(json.dumps(c) for c in unique)
    return _validated(
        llguidance.LLMatcher.grammar_from_lark(f"start: CHOICE\nCHOICE: {alternatives}\n"),
        limits,
        "choice",
    )


def check_choices(choices: list[str], limits: Limits) -> None:
    """Type and size checks of a choice list (cheap)."""
    if isinstance(choices, str) or not choices:
        raise InvalidGrammarError("a choice constraint needs a non-empty list of strings")
    if len(choices) > limits.max_enum:
        raise ConstraintTooLargeError(f"{len(choices)} choices", "max_enum")
    if not all(isinstance(c, str) for c in choices):
        raise InvalidGrammarError("every choice must be a string")
    if sum(len(c.encode()) for c in choices) > limits.max_text_bytes:
        raise ConstraintTooLargeError("choices are too large", "max_text_bytes")


def lark_text(text: str, limits: Limits) -> str:
    """The Lark text of a Lark or GBNF grammar (GBNF is recognised by ``::=`` rules)."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidGrammarError("a grammar must be a non-empty string")
    if len(text.encode()) > limits.max_text_bytes:
        raise ConstraintTooLargeError("grammar text is too large", "max_text_bytes")
    if "::=" in text:
        try:
            text = any_to_lark(text)
        except Exception as exc:  # the converter raises plain exceptions on bad GBNF
            raise InvalidGrammarError(f"invalid GBNF grammar: {exc}") from None
    for regex in _regex_literals(text):
        if max_repetition(regex) > limits.max_repetition:
            raise ConstraintTooLargeError(
                f"grammar regex repetition above {limits.max_repetition}", "max_repetition"
            )
    return text


def lark_grammar(text: str, limits: Limits, json_rules: dict | None = None) -> str:
    """An llguidance grammar for a Lark or GBNF ``text``; ``json_rules`` (rule name ->
    translated JSON Schema) are appended as ``name: %json {...}`` rules."""
    lark = lark_text(text, limits)
    for name, schema in (json_rules or {}).items():
        lark += f"\n{name}: %json {json.dumps(schema, ensure_ascii=False)}\n"
    return _validated(llguidance.LLMatcher.grammar_from_lark(lark), limits, "grammar")


def validated_lark(text: str, limits: Limits, what: str) -> str:
    """An llguidance grammar for Lark ``text`` written by Stencil itself (no GBNF translation)."""
    return _validated(llguidance.LLMatcher.grammar_from_lark(text), limits, what)


def _validated(grammar: str, limits: Limits, what: str) -> str:
    message = llguidance.LLMatcher.validate_grammar(grammar, limits=parser_limits(limits))
    if message:
        raise grammar_error(message, what)
    return grammar


def _regex_literals(text: str) -> list[str]:
    """Bodies of ``/.../`` regex literals and ``{m,n}`` repeats in a Lark grammar text."""
    out, i = [], 0
    while (start := text.find("/", i)) >= 0:
        end = start + 1
        while end < len(text) and text[end] not in "/\n":
            end += 2 if text[end] == "\\" else 1
        out.append(text[start + 1 : end])
        i = end + 1
    out.append(text)  # rule-level {m,n} / ~ m..n repeats in the grammar text itself
    return out
