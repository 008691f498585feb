"""Map llguidance's grammar-validation messages onto Stencil's ``ConstraintError`` types."""

from __future__ import annotations

import re

from ..errors import (
    ConstraintError,
    ConstraintTooLargeError,
    InvalidGrammarError,
    InvalidSchemaError,
    UnsupportedSchemaError,
)


def short(message: str, lines: int = 3) -> str:
    kept = [line.strip() for line in message.splitlines() if line.strip()]
    return " ".join(kept[:lines])[:500]


def schema_error(
    message: str, keyword_pointers: dict[str, str], one_of_pointers: list[str]
) -> ConstraintError:
    """The error for an llguidance message about a translated JSON schema."""
    text = short(message)
    if m := re.search(r'Unimplemented keys: \["([^"]+)"', message):
        return UnsupportedSchemaError(m.group(1), keyword_pointers.get(m.group(1), ""), text)
    if "oneOf constraints are not supported" in message:
        where = one_of_pointers[0] if one_of_pointers else ""
        return UnsupportedSchemaError("oneOf", where, "branches not shown mutually exclusive")
    if "min/maxProperties" in message:
        key = "minProperties" if "minProperties" in keyword_pointers else "maxProperties"
        return UnsupportedSchemaError(key, keyword_pointers.get(key, ""), text)
    if "patternProperty regexes" in message:
        return UnsupportedSchemaError(
            "patternProperties", keyword_pointers.get("patternProperties", ""), text
        )
    if "lookaround" in message:
        return UnsupportedSchemaError("pattern", keyword_pointers.get("pattern", ""), text)
    if too_large(message):
        return ConstraintTooLargeError(f"schema grammar too large: {text}", "max_grammar_size")
    if "Unsatisfiable" in message or "regex" in message.lower():
        return InvalidSchemaError(text)
    named = [k for k in keyword_pointers if re.search(rf"\b{re.escape(k)}\b", message)]
    if named:
        return UnsupportedSchemaError(named[0], keyword_pointers[named[0]], text)
    return UnsupportedSchemaError("schema", "", text)


def grammar_error(message: str, what: str = "grammar") -> ConstraintError:
    text = short(message)
    if too_large(message):
        return ConstraintTooLargeError(f"{what} too large: {text}", "max_grammar_size")
    return InvalidGrammarError(f"invalid {what}: {text}")


def too_large(message: str) -> bool:
    lowered = message.lower()
    return "too big" in lowered or "too large" in lowered or "limit" in lowered
