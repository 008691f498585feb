"""Grounded JSON: string values that can only be verbatim spans of a source text, numbers and
dates that it states. ``marking`` finds the grounded strings, ``lark_writer`` writes the grammar,
``grounded_spans`` co-matches the long spans at decode time over a suffix automaton
(``span_automaton``: the C walk in ``csrc/span_walk.c``; ``span_automaton_ref``: its Python twin)
of the source, stepping tokens through a ``token_trie``; ``stated`` reads the numbers and dates a
text states; ``lexicon`` (``lexicon.toml``) holds the words documents print (labels, month names,
currency signs) and ``document_index`` reads one document through both; ``soft_breaks`` finds
where a text was wrapped inside a sentence."""

from .lark_writer import grounded_lark
from .marking import (
    claimed_kinds,
    described_numbers,
    mark_grounded,
    number_enum,
    uses_grounding,
)
from .soft_breaks import unwrapped

__all__ = [
    "claimed_kinds",
    "described_numbers",
    "grounded_lark",
    "mark_grounded",
    "number_enum",
    "unwrapped",
    "uses_grounding",
]
