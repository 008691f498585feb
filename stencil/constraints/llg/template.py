"""Build (and validate) the llguidance matcher template of a translated constraint."""

from __future__ import annotations

import llguidance

from .errors import ConstraintError, InvalidGrammarError, InvalidSchemaError
from .llg_errors import grammar_error, short
from .spec import Constraint
from .vocab import TokenVocab


def build_template(
    vocab: TokenVocab, constraint: Constraint, limits: llguidance.LLParserLimits
) -> llguidance.LLMatcher:
    """The matcher every ``new_matcher()`` copies; raises ConstraintError for an invalid grammar
    or an empty language (found by computing the first mask, which also warms the lexer)."""
    matcher = llguidance.LLMatcher(
        vocab.llg_tokenizer, constraint.llg_grammar, log_level=0, limits=limits
    )
    if matcher.is_error():
        raise _error(constraint, matcher.get_error())
    probe = matcher.deep_copy()
    first = probe.compute_bitmask()
    stuck = probe.is_error() and probe.get_error().startswith("NoExtension")
    empty = not any(first) or stuck
    if empty and not probe.is_accepting():
        raise _error(constraint, "the constraint derives no string (its language is empty)")
    if probe.is_error():
        raise _error(constraint, probe.get_error())
    return matcher


def _error(constraint: Constraint, message: str) -> ConstraintError:
    if constraint.kind == "json":
        return InvalidSchemaError(short(message))
    if "derives no string" in message:
        return InvalidGrammarError(f"invalid {constraint.kind}: {message}")
    return grammar_error(message, constraint.kind)
