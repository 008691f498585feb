"""Per-vocabulary token facts the decode-time checks use to find, in a mask, the tokens that
can complete a JSON value (built once per ``ConstraintCompiler``, ~40 ms for 151k tokens)."""

from __future__ import annotations

import numpy as np

from ..vocab import TokenVocab

_QUOTE = 0x22
_INERT = frozenset(b" \t\r\n:,[{")
"""Bytes after a closing quote that complete nothing more (a key's colon, a separator, the
start of a container)."""


class TokenTable:
    """``bytes`` of every token, and index arrays over token ids."""

    __slots__ = ("bytes", "has_quote", "structural", "clean_quote", "inert_rest")

    def __init__(self, vocab: TokenVocab) -> None:
        size = vocab.tokenizer_size
        raw = [vocab.token_bytes(t) if not vocab.is_special(t) else b"" for t in range(size)]
        self.bytes = raw
        quote = np.zeros(vocab.vocab_size, dtype=bool)
        structural = np.zeros(vocab.vocab_size, dtype=bool)
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
            # outside strings a token completes a value only if it does not just open a string
            stripped = data.lstrip(b" \t\r\n")
            structural[t] = stripped[:1] != b'"' or data.count(b'"') >= 2
        self.has_quote = quote
        """Tokens with a double quote (the end of a string can only come with one)."""
        self.structural = structural
        """Tokens that can complete a value when read outside a string."""
        self.clean_quote = clean
        """Tokens whose first double quote is not preceded by a backslash in the token."""
        self.inert_rest = inert
        """Tokens that complete nothing after their first double quote."""
