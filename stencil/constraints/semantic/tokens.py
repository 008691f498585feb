"""Per-vocabulary token facts the decode-time checks use to find, in a mask, the tokens that
can complete a JSON value (built once per ``ConstraintCompiler``, ~40 ms for 151k tokens)."""

from __future__ import annotations

import numpy as np

from ..vocab import TokenVocab

_QUOTE = 0x22
_INERT = frozenset(b" \t\r\n:,[{")
"""Bytes after a closing quote that complete nothing more (a key's colon, a separator, the
start of a container)."""
_NUMBER = frozenset(b"0123456789+-.eE")
_LITERAL_LENGTH = {ord("t"): 4, ord("f"): 5, ord("n"): 4}


def closes_from_structure(data: bytes) -> bool:
    """Whether ``data``, read between values (no string, number or literal open), can complete
    one: a closing bracket, a number followed by a byte outside numbers, a whole literal, or a
    string opened and closed (a key counts: the reader here has no stack)."""
    i, n = 0, len(data)
    while i < n:
        b = data[i]
        if b in b"}]":
            return True
        if b == _QUOTE:
            i += 1
            while i < n and data[i] != _QUOTE:
                i += 2 if data[i] == 0x5C else 1
            if i < n:
                return True
        elif b in _LITERAL_LENGTH:
            if n - i >= _LITERAL_LENGTH[b]:
                return True
            return False
        elif b in _NUMBER:
            while i < n and data[i] in _NUMBER:
                i += 1
            return i < n
        i += 1
    return False


class TokenTable:
    """``bytes`` of every token, and index arrays over token ids."""

    __slots__ = (
        "bytes",
        "has_quote",
        "closes_struct",
        "closes_number",
        "clean_quote",
        "inert_rest",
        "words",
    )

    def __init__(self, vocab: TokenVocab) -> None:
        size = vocab.tokenizer_size
        raw = [vocab.token_bytes(t) if not vocab.is_special(t) else b"" for t in range(size)]
        self.bytes = raw
        quote = np.zeros(vocab.vocab_size, dtype=bool)
        closes_struct = np.zeros(vocab.vocab_size, dtype=bool)
        closes_number = np.zeros(vocab.vocab_size, dtype=bool)
        clean = np.zeros(vocab.vocab_size, dtype=bool)
        inert = np.zeros(vocab.vocab_size, dtype=bool)
        for t, data in enumerate(raw):
            if not data:
                continue
            q = data.find(b'"')
            if q >= 0:
                quote[t] = True
                clean[t] = b"\\" not in data[:q]
                inert[t] = all(b in _INERT for b in data[q + 1 :])
            closes_struct[t] = closes_from_structure(data)
            closes_number[t] = any(b not in _NUMBER for b in data)
        self.has_quote = quote
        """Tokens with a double quote (the end of a string can only come with one)."""
        self.closes_struct = closes_struct
        """Tokens that can complete a value when read between values."""
        self.closes_number = closes_number
        """Tokens that end a number being read (a byte no number holds)."""
        self.clean_quote = clean
        """Tokens whose first double quote is not preceded by a backslash in the token."""
        self.inert_rest = inert
        """Tokens that complete nothing after their first double quote."""
        live = quote & ~(clean & inert)
        self.words = {
            "has_quote": _packed(quote),
            "closes_struct": _packed(closes_struct),
            "closes_number": _packed(closes_number),
            "live_quote": _packed(live),
        }
        """The sets above as packed bitmask rows (uint32 words, bit 1 = in the set): a mask
        row ANDed with one gives the candidates without unpacking the vocabulary.
        ``live_quote``: a quote with something after it that may complete a value."""


def _packed(flags: np.ndarray) -> np.ndarray:
    """``flags`` (bool per token) as little-endian uint32 words, padded to a whole word."""
    padded = np.zeros(-(-len(flags) // 32) * 32, dtype=bool)
    padded[: len(flags)] = flags
    return np.packbits(padded, bitorder="little").view(np.uint32)


def ids_of(words: np.ndarray) -> np.ndarray:
    """Token ids of the set bits of packed ``words`` (cheap when few words are non-zero)."""
    nonzero = np.flatnonzero(words)
    if not len(nonzero):
        return nonzero
    bits = np.unpackbits(words[nonzero].view(np.uint8), bitorder="little").reshape(-1, 32)
    rows, cols = np.nonzero(bits)
    return nonzero[rows] * 32 + cols
