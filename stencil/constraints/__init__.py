"""Constraint compiler: JSON Schema, regex, choice and grammar -> per-step token masks.

Pure CPU; imports nothing from ``stencil.engine``, ``stencil.api`` or ``stencil.kernels``.
Token-level matching is llguidance's (Earley parser + lazy lexer); Stencil owns the
front end (schema translation, validation, budgets, whitespace policy) and the API.
"""

# first: jsonschema, imported below, finds rfc3987-syntax's stand-in (``deferred_rfc3987``)
from . import deferred_rfc3987  # noqa: F401
from .bitmask import allocate_token_bitmask, bitmask_to_bool
from .compiler import CompiledConstraint, ConstraintCompiler
from .errors import (
    CompileCancelledError,
    CompileCrashError,
    CompileMemoryError,
    CompileTimeoutError,
    CompileWorkerError,
    ConstraintError,
    ConstraintTooLargeError,
    InvalidGrammarError,
    InvalidRegexError,
    InvalidSchemaError,
    UnstatedValueError,
    UnsupportedSchemaError,
)
from .grounding import claimed_kinds, described_numbers, number_enum, unwrapped, uses_grounding
from .grounding.document_index import DocumentIndex, Label, number_runs, without_label
from .grounding.lexicon import LEXICON, Lexicon
from .grounding.stated import (
    currencies_in,
    currencies_named,
    date_mentions,
    date_spans,
    dates_in,
    dois_in,
    ibans_in,
    number_mentions,
    number_spans,
    numbers_in,
    numbers_in_units,
    period_spans,
    phones_in,
    readings_in,
    times_in,
)
from .limits import Limits
from .matcher import Matcher
from .spec import Constraint
from .translation import Translation, translate
from .vocab import TokenVocab, special_token_ids

__all__ = [
    "claimed_kinds",
    "described_numbers",
    "CompileCancelledError",
    "CompileCrashError",
    "CompileMemoryError",
    "CompileTimeoutError",
    "CompileWorkerError",
    "LEXICON",
    "CompiledConstraint",
    "Constraint",
    "ConstraintCompiler",
    "ConstraintError",
    "ConstraintTooLargeError",
    "DocumentIndex",
    "InvalidGrammarError",
    "InvalidRegexError",
    "InvalidSchemaError",
    "Label",
    "Lexicon",
    "Limits",
    "Matcher",
    "TokenVocab",
    "Translation",
    "UnstatedValueError",
    "UnsupportedSchemaError",
    "allocate_token_bitmask",
    "bitmask_to_bool",
    "currencies_in",
    "currencies_named",
    "date_mentions",
    "date_spans",
    "dates_in",
    "dois_in",
    "ibans_in",
    "number_enum",
    "number_mentions",
    "number_runs",
    "number_spans",
    "numbers_in",
    "numbers_in_units",
    "period_spans",
    "phones_in",
    "readings_in",
    "special_token_ids",
    "times_in",
    "translate",
    "unwrapped",
    "uses_grounding",
    "without_label",
]
