"""Cheap pre-flight checks of regular expressions: syntax (via llguidance) and repetition bounds."""

from __future__ import annotations

import json
from collections.abc import Iterable

import llguidance

from ..errors import ConstraintTooLargeError, InvalidRegexError
from ..limits import Limits

_BRACED_ESCAPES = frozenset("xupPNk")


def _skip_class(pattern: str, i: int) -> int:
    """Index just past the character class that starts at ``pattern[i] == '['``."""
    i += 1
    if i < len(pattern) and pattern[i] == "^":
        i += 1
    if i < len(pattern) and pattern[i] == "]":
        i += 1
    depth = 1
    while i < len(pattern) and depth:
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
        i += 1
    return i


def _quantifier(pattern: str, i: int) -> tuple[int, int] | None:
    """``(bound, end)`` for a ``{m}``, ``{m,}`` or ``{m,n}`` quantifier at ``i``, else None."""
    end = pattern.find("}", i)
    if end < 0:
        return None
    body = pattern[i + 1 : end].replace(" ", "")
    parts = body.split(",")
    if (
        len(parts) > 2
        or not parts[0].isdigit()
        or (len(parts) == 2 and parts[1] and not parts[1].isdigit())
    ):
        return None
    return max(int(p) for p in parts if p), end + 1


def max_repetition(pattern: str) -> int:
    """Largest product of nested ``{m,n}`` bounds (``*`` and ``+`` count as 1)."""
    stack: list[int] = [1]  # running max inside each open group
    last_atom = 1  # repetition product of the atom just closed
    best, i = 1, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            if (
                i - 1 < len(pattern)
                and pattern[i - 1] in _BRACED_ESCAPES
                and pattern[i : i + 1] == "{"
            ):
                i = pattern.find("}", i) + 1 or len(pattern)
            last_atom = 1
            continue
        if c == "[":
            i, last_atom = _skip_class(pattern, i), 1
            continue
        if c == "(":
            stack.append(1)
        elif c == ")" and len(stack) > 1:
            last_atom = stack.pop()
        elif c == "{" and (q := _quantifier(pattern, i)) is not None:
            bound, i = q
            product = max(bound, 1) * last_atom
            stack[-1] = max(stack[-1], product)
            best = max(best, product)
            continue
        else:
            last_atom = 1
        if c not in "()":
            stack[-1] = max(stack[-1], 1)
        i += 1
    return max(best, *stack)


def check_regex(
    pattern: str, limits: Limits, what: str = "regex", parsed: frozenset[str] = frozenset()
) -> None:
    """Raise a ``ConstraintError`` unless ``pattern`` parses and fits the budgets.

    ``parsed``: patterns already known to parse (``parsed_regexes``); the budgets are still
    checked."""
    _check_budgets(pattern, limits, what)
    if pattern in parsed:
        return
    grammar = llguidance.LLMatcher.grammar_from_regex(pattern)
    message = llguidance.LLMatcher.validate_grammar(grammar)
    if message:
        raise InvalidRegexError(f"invalid {what} {pattern!r}: {_first_lines(message)}")


def parsed_regexes(patterns: Iterable[str], limits: Limits) -> frozenset[str]:
    """The ``patterns`` that llguidance parses, vouched for by one grammar build for all of
    them (a build costs ~0.4 ms however small the grammar, so a schema with many patterns
    paid that per pattern): the patterns within the budgets become the alternatives of one
    grammar, and if it validates each one parses. Otherwise (a pattern that does not parse,
    or a union over a parser budget) none is vouched for and ``check_regex`` checks each
    alone, with its own error message."""
    alternatives: dict[str, str] = {}
    for pattern in dict.fromkeys(patterns):
        try:
            _check_budgets(pattern, limits, "regex")
        except ConstraintTooLargeError:
            continue
        lark = json.loads(llguidance.LLMatcher.grammar_from_regex(pattern))
        body = lark["grammars"][0].get("lark_grammar") or ""
        if not body.startswith("start: /") or "\n" in body:
            return frozenset()
        alternatives[pattern] = body[len("start: ") :]
    if len(alternatives) < 2:
        return frozenset()
    union = "start: " + " | ".join(alternatives.values()) + "\n"
    grammar = llguidance.LLMatcher.grammar_from_lark(union)
    if llguidance.LLMatcher.validate_grammar(grammar):
        return frozenset()
    return frozenset(alternatives)


def _check_budgets(pattern: str, limits: Limits, what: str) -> None:
    if len(pattern.encode()) > limits.max_regex_bytes:
        raise ConstraintTooLargeError(f"{what} is too long", "max_regex_bytes")
    if (rep := max_repetition(pattern)) > limits.max_repetition:
        raise ConstraintTooLargeError(
            f"{what} repetition bound {rep} is above the maximum {limits.max_repetition}",
            "max_repetition",
        )


def _first_lines(message: str, n: int = 4) -> str:
    return " ".join(line.strip() for line in message.splitlines()[:n] if line.strip())
