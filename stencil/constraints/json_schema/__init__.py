"""JSON Schema -> llguidance grammar, with strict keyword accounting (see ``normalize``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import llguidance

from ..errors import InvalidSchemaError
from ..limits import Limits
from ..llg.limits import parser_limits
from . import document
from .normalize import Normalizer
from .refusals import refusal

_CIRCULAR = "circular references with sibling keys"
_OVERLAP = "are not disjoint"  # llguidance: two patternProperties keys of one object overlap
# llguidance's JSON strings take `\u` escapes of ASCII only unless asked; any escape is valid JSON
# (`json.dumps` writes every non-ASCII character as one), and counts as one character in lengths
_ESCAPES = {"json_allow_general_unicode_escapes": True}


def _build(
    schema: dict[str, Any], guidance: dict[str, Any], limits: Limits
) -> tuple[dict[str, Any], str, str]:
    """``(schema handed to llguidance, its grammar, llguidance's error message or "")``."""
    translated = {**schema, "x-guidance": {**_ESCAPES, **guidance}}
    try:
        grammar = llguidance.LLMatcher.grammar_from_json_schema(json.dumps(translated))
    except ValueError as exc:
        if _CIRCULAR in str(exc):
            return translated, "", str(exc)
        raise InvalidSchemaError(str(exc)) from None
    return (
        translated,
        grammar,
        llguidance.LLMatcher.validate_grammar(grammar, limits=parser_limits(limits)),
    )


@dataclass(frozen=True, slots=True)
class PreparedSchema:
    grammar: str
    """llguidance grammar (JSON text) for the translated schema."""
    schema: dict[str, Any]
    """The translated schema handed to llguidance."""
    warnings: tuple[str, ...]
    checks: tuple[tuple[str, str], ...] = ()
    """``(pointer, keyword)`` of each keyword the grammar over-approximates: checked when a
    value completes (``stencil.constraints.semantic``)."""
    draft: int = 2020


def prepare(
    schema: Any, *, closed: bool, guidance: dict[str, Any], limits: Limits
) -> PreparedSchema:
    """Translate and validate ``schema`` (an already loaded document); raise ConstraintError."""
    draft = document.check_meta(schema, document.draft_of(schema))
    if schema is False:
        raise InvalidSchemaError("the schema is `false`: no instance is valid")
    root = {} if schema is True else schema
    options: dict[str, bool] = {}
    result = Normalizer(root, draft=draft, closed=closed, limits=limits).run()
    translated, grammar, message = _build(result.schema, guidance, limits)
    if _OVERLAP in message:
        # the any-key pattern met other patternProperties in an allOf: undeclared keys as
        # llguidance admits them (an escaped spelling of a name passes as undeclared there)
        options["canonical_keys"] = False
        result = Normalizer(root, draft=draft, closed=closed, limits=limits, **options).run()
        translated, grammar, message = _build(result.schema, guidance, limits)
    if _CIRCULAR in message:
        # a $ref with sibling keywords inside a recursion: the grammar follows the $ref and
        # the siblings are checked as the value completes
        options["loose_refs"] = True
        loose = Normalizer(root, draft=draft, closed=closed, limits=limits, **options)
        result = loose.run()
        translated, grammar, message = _build(result.schema, guidance, limits)
    if message:
        raise refusal(message, result, root)
    checks = tuple(dict.fromkeys(result.checks))
    return PreparedSchema(grammar, translated, tuple(result.warnings), checks, draft)
