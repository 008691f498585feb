"""Keywords a grammar cannot state exactly: an exact rewrite where one exists, else a grammar
that admits a superset plus a decode-time check (``Normalized.checks``; enforced by
``stencil.constraints.semantic`` when the value completes).

Rewrites are exact only over subschemas the grammar states exactly: a subschema that itself
needed a check is never negated (its complement would be too small)."""

from __future__ import annotations

import itertools
import math
from typing import Any

import jsonschema
import regex

from ..errors import InvalidRegexError, UnsupportedSchemaError
from ..llg.regex_check import check_regex
from ..semantic.formats import checked_formats
from . import logic, negation, quoted_classes
from .ecma_regex import ecma_pattern, structure
from .keywords import (
    FORMAT_PATTERNS,
    FORMAT_SUPERSETS,
    NATIVE_FORMATS,
    UNENFORCEABLE_FORMATS,
)
from .presence import Presence
from .refs import escape

Schema = dict[str, Any] | bool
MAX_ARRANGEMENTS = 256
"""``uniqueItems`` over a finite item domain is spelled out as every arrangement of distinct
values up to this many (``set[bool]``: 5; a 4-value enum: 65; 5 values: 326, checked instead)."""
_FINITE_KEYS = frozenset(
    {"type", "enum", "const", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}
)
_MAX_RANGE = 8
RECHECKED_FORMATS = frozenset({"email", "base64", "base64url", "duration"})
"""In the grammar (native or a pattern) and also checked with Pydantic's semantics, which are
stricter (email-validator's syntax rules; base64 text of UTF-8; durations within Pydantic's
``timedelta`` range)."""


class Approximations:
    """Mixin of ``Normalizer``: needs ``node``, ``lookup``, ``out`` and ``limits``."""

    def check(self, pointer: str, keyword: str) -> None:
        self.out.checks.append((pointer, keyword))

    def exact_node(self, schema: Any, ptr: str, base: str, in_all_of: bool) -> Schema | None:
        """The normalized subschema, or None when it needed a decode-time check itself."""
        before = len(self.out.checks)
        node = self.node(schema, ptr, base, in_all_of)
        return node if len(self.out.checks) == before else None

    def unique_items(self, schema: dict, out: dict, ptr: str) -> None:
        branches = self._arrangements(schema, out)
        if branches is None:
            self.check(ptr, "uniqueItems")
        else:
            out.setdefault("allOf", []).append({"anyOf": branches})

    def _arrangements(self, schema: dict, out: dict) -> list[Schema] | None:
        """Every array of distinct values of a small finite item domain, or None."""
        if "prefixItems" in out or isinstance(schema.get("items"), list):
            return None
        item = logic.deref(out.get("items", True), self.lookup)
        values = _finite_values(item)
        if values is None:
            return None
        n = len(values)
        low = int(out.get("minItems", 0))
        high = min(int(out.get("maxItems", n)), n)
        count = sum(math.perm(n, k) for k in range(low, high + 1))
        if count > MAX_ARRANGEMENTS:
            return None
        branches: list[Schema] = []
        for k in range(low, high + 1):
            for combo in itertools.permutations(values, k):
                prefix = [{"const": v} for v in combo]
                branches.append(
                    {"prefixItems": prefix, "items": False, "minItems": k} if k else {"maxItems": 0}
                )
        return branches or [False]

    def conditional(self, schema: dict, extra: list, ptr: str, base: str) -> None:
        """``if`` / ``then`` / ``else``: ``anyOf`` of (if and then, not-if and else) when
        ``if`` can be negated exactly; else the grammar admits ``then`` or ``else`` and the
        value is checked as it completes."""
        if "then" not in schema and "else" not in schema:
            return
        then = self._branch(schema, "then", ptr, base)
        other = self._branch(schema, "else", ptr, base)
        condition = self.exact_node(schema["if"], f"{ptr}/if", base, True)
        opposite = None if condition is None else negation.negate(condition)
        if opposite is not None:  # then / else may be loose: their own checks apply
            extra.append({"anyOf": [_all(condition, then), _all(opposite, other)]})
            return
        self.check(ptr, "if")
        if then is not True and other is not True:
            extra.append({"anyOf": [then, other]})

    def _branch(self, schema: dict, key: str, ptr: str, base: str) -> Schema:
        return self.node(schema[key], f"{ptr}/{key}", base, True) if key in schema else True

    def contains(self, value: Any, schema: dict, out: dict, ptr: str, base: str) -> None:
        """``contains`` / ``minContains`` / ``maxContains``: checked as the array completes;
        the grammar asks for at least ``minContains`` items."""
        self.node(value, f"{ptr}/contains", base, False)  # checks the subschema is readable
        need = schema.get("minContains", 1)
        if value is not False and isinstance(need, int | float) and need > 0:
            out["minItems"] = max(int(need), int(schema.get("minItems", 0)))
        self.check(ptr, "contains")

    def negation(self, value: Any, extra: list, ptr: str, base: str) -> None:
        inner = self.exact_node(value, f"{ptr}/not", base, False)
        negated = None if inner is None else negation.negate(inner)
        if negated is None:
            self.check(ptr, "not")
        else:
            extra.append(negated)

    def one_of(
        self, value: list, out: dict, typing: dict, ptr: str, base: str, presence: Presence
    ) -> None:
        here = f"{ptr}/oneOf"
        branches = [
            self.member(presence, v, f"{here}/{i}", base, False) for i, v in enumerate(value)
        ]
        branches = [b for b in branches if b is not False]
        if len(branches) <= 1:
            out.setdefault("allOf", []).append(branches[0] if branches else False)
            return
        context = logic.types_of(typing, self.lookup) & presence.types
        as_any = logic.one_of_as_any_of(branches, self.lookup, context, presence.required)
        if as_any is None:  # exclusivity is checked as the value completes
            self.check(ptr, "oneOf")
            as_any = branches
        if "anyOf" in out:
            out.setdefault("allOf", []).append({"anyOf": as_any})
        else:
            out["anyOf"] = as_any

    def format(self, value: Any, out: dict, extra: list, ptr: str) -> None:
        name = value  # an unknown name (`url`, draft 3's `host-name`) is an annotation
        here = f"{ptr}/format"
        checked = checked_formats(jsonschema.Draft202012Validator.FORMAT_CHECKER)
        in_grammar = name in NATIVE_FORMATS or name in FORMAT_PATTERNS
        if name in NATIVE_FORMATS:
            out["format"] = name
        elif name in FORMAT_PATTERNS:
            extra.append({"pattern": FORMAT_PATTERNS[name]})
        if name in checked and (not in_grammar or name in RECHECKED_FORMATS):
            self.check(ptr, "format")
            if name in FORMAT_SUPERSETS:
                extra.append({"pattern": FORMAT_SUPERSETS[name]})
        elif in_grammar:
            return
        elif name in UNENFORCEABLE_FORMATS:
            raise UnsupportedSchemaError("format", here, f"format {value!r} is not enforced")
        else:
            self.out.warnings.append(
                f"unknown format {value!r} at {here!r} not enforced (annotation)"
            )

    def string_pattern(self, pattern: str, out: dict, extra: list, ptr: str) -> None:
        """``pattern`` of a string: in the grammar, made safe to JSON-quote
        (``quoted_classes``), else checked as the string completes."""
        readable = self.pattern(pattern, "pattern", f"{ptr}/pattern", ptr)
        if readable is None:
            return
        safe = quoted_classes.guarded(readable)
        out["pattern"] = safe.pattern
        if safe.guard is not None:
            extra.append({"pattern": safe.guard})
        if safe.checked:
            self.check(ptr, "pattern")

    def key_pattern(self, pattern: str, here: str) -> str:
        """A ``patternProperties`` key, made safe to JSON-quote; where it cannot be, the
        object is checked as it completes."""
        readable = self.pattern(pattern, "patternProperties pattern", f"{here}/{escape(pattern)}")
        safe = quoted_classes.guarded(readable)
        if safe.guard is not None or safe.checked:
            self.check(here.rsplit("/", 1)[0], "patternProperties")
        return safe.pattern

    def pattern(self, pattern: str, what: str, at: str, ptr: str | None = None) -> str | None:
        """A checked JSON Schema (ECMA-262) pattern (``what`` at pointer ``at``) in the syntax
        llguidance reads; None when only a decode-time check of the node at ``ptr`` can read
        it (look-around, back-references)."""
        try:
            check_regex(pattern, self.limits, what, self.parsed_patterns)
        except InvalidRegexError as exc:
            if ptr is None or not _readable(pattern):
                raise InvalidRegexError(str(exc), what.split()[0], at) from None
            self.check(ptr, "pattern")
            loose = superset_pattern(pattern)
            try:
                check_regex(loose, self.limits, what)
            except InvalidRegexError:
                return None
            return ecma_pattern(loose)
        return ecma_pattern(pattern)


def superset_pattern(pattern: str) -> str:
    """``pattern`` without look-around assertions (each only narrows what matches) and with
    back-references as "anything": a pattern matching at least what ``pattern`` matches."""
    out: list[str] = []
    i, n, depth = 0, len(pattern), 0
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            if depth == 0 and (nxt in "123456789" or nxt == "k"):
                end = pattern.find(">", i) + 1 if nxt == "k" else i + 2
                while nxt != "k" and end < n and pattern[end].isdigit():
                    end += 1
                out.append("[\\s\\S]*")
                i = end
                continue
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if c == "[":
            depth += 1
        elif c == "]" and depth:
            depth -= 1
        elif depth == 0 and pattern.startswith(_LOOKAROUND, i):
            i = _group_end(pattern, i)
            continue
        out.append(c)
        i += 1
    return "".join(out)


_LOOKAROUND = ("(?=", "(?!", "(?<=", "(?<!")


def _group_end(pattern: str, i: int) -> int:
    """Index just past the group opening at ``pattern[i] == "("``."""
    for j, c, depth in structure(pattern, i):
        if c == ")" and depth == 1:
            return j + 1
    return len(pattern)


def _readable(pattern: str) -> bool:
    try:
        regex.compile(pattern)
    except regex.error:
        return False
    return True


def _all(a: Schema, b: Schema) -> Schema:
    parts = [s for s in (a, b) if s is not True]
    if False in parts:
        return False
    return {"allOf": parts} if len(parts) > 1 else (parts[0] if parts else True)


def _integer_range(item: dict) -> list[int] | None:
    """The integers of a small ``minimum`` / ``maximum`` range."""
    low = [math.ceil(item[k]) for k in ("minimum",) if k in item]
    low += [math.floor(item[k]) + 1 for k in ("exclusiveMinimum",) if k in item]
    high = [math.floor(item[k]) for k in ("maximum",) if k in item]
    high += [math.ceil(item[k]) - 1 for k in ("exclusiveMaximum",) if k in item]
    if not low or not high or max(high) - max(low) >= _MAX_RANGE:
        return None
    return list(range(max(low), min(high) + 1))


def _finite_values(item: Schema) -> list[Any] | None:
    if not isinstance(item, dict) or not set(item) <= _FINITE_KEYS:
        return None
    if set(item) & {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} and (
        item.get("type") != "integer" or "enum" in item or "const" in item
    ):
        return None
    if "const" in item:
        candidates = [item["const"]]
    elif "enum" in item:
        candidates = list(item["enum"])
    else:
        kinds = item.get("type")
        kinds = [kinds] if isinstance(kinds, str) else kinds
        if kinds == ["integer"]:
            return _integer_range(item)
        if not isinstance(kinds, list) or not set(kinds) <= {"boolean", "null"}:
            return None
        candidates = [v for k in kinds for v in ((True, False) if k == "boolean" else (None,))]
    validator = jsonschema.Draft202012Validator(item)
    out: dict[str, Any] = {}
    for v in candidates:
        if validator.is_valid(v):
            out.setdefault(logic.canonical_text(v), v)
    return list(out.values())


__all__ = ["Approximations", "escape"]
