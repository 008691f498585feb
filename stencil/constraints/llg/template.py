"""Build (and validate) the llguidance matcher template of a translated constraint's grammar."""

from __future__ import annotations

import llguidance

from ..errors import ConstraintError, InvalidGrammarError, InvalidSchemaError
from ..vocab import TokenVocab
from .errors import grammar_error, short
from .token_refs import check_token_refs


def build_template(
    vocab: TokenVocab, kind: str, grammar: str, limits: llguidance.LLParserLimits
) -> llguidance.LLMatcher:
    """The matcher every ``new_matcher()`` copies; raises ConstraintError for an invalid grammar
    or an empty language (found by computing the first mask, which also warms the lexer), and
    for a grammar that names a plain token as ``<[id]>`` (``token_refs``)."""
    if kind == "grammar":
        check_token_refs(grammar, vocab)
    matcher = llguidance.LLMatcher(vocab.llg_tokenizer, grammar, log_level=0, limits=limits)
    if matcher.is_error():
        raise _error(kind, matcher.get_error())
    probe = matcher.deep_copy()
    first = probe.compute_bitmask()
    stuck = probe.is_error() and probe.get_error().startswith("NoExtension")
    empty = not any(first) or stuck
    if empty and not probe.is_accepting():
        raise _error(kind, "the constraint derives no string (its language is empty)")
    if probe.is_error():
        raise _error(kind, probe.get_error())
    return matcher


def _error(kind: str, message: str) -> ConstraintError:
    if kind == "json":
        return InvalidSchemaError(short(message))
    if "derives no string" in message:
        return InvalidGrammarError(f"invalid {kind}: {message}")
    return grammar_error(message, kind)
