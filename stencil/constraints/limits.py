"""Size budgets enforced on every constraint before and during compilation."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Limits:
    """Configurable budgets; a constraint over any of them raises ``ConstraintTooLargeError``."""

    max_text_bytes: int = 2 << 20
    """Serialized schema / grammar size."""
    max_regex_bytes: int = 64 << 10
    max_depth: int = 256
    """Nesting depth of the schema document (objects and arrays)."""
    max_enum: int = 10_000
    """Members of one ``enum`` (and entries of a choice list)."""
    max_repetition: int = 10_000
    """Largest bound of a regex repetition ``{m,n}``."""
    max_grammar_size: int = 500_000
    """llguidance grammar symbols."""
    max_lexer_states: int = 250_000
    step_lexer_fuel: int = 200_000
    step_max_items: int = 50_000
    max_items_in_row: int = 10_000
    """Earley items in one parser row: a union of N alternatives (a ``oneOf`` of N objects)
    needs N at its first token; as large as ``max_enum`` (llguidance's default is 2,000)."""
    initial_lexer_fuel: int = 1_000_000


DEFAULT_LIMITS = Limits()
