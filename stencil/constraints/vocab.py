"""``TokenVocab``: a model's tokens as exact bytes, its EOS ids and its (padded) size."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from copy import copy
from dataclasses import dataclass, field
from typing import Any

import llguidance

PREFIX_BYTES = 64
"""How far ``prefix_tokens`` looks (longer tokens are runs of spaces or dashes)."""


@dataclass(frozen=True, slots=True, eq=False)
class TokenVocab:
    """Immutable and shared by every compile for one model.

    ``vocab_size`` is the model's logits width; ids at or above the tokenizer's own size are
    padding and are never allowed by any mask.
    """

    llg_tokenizer: llguidance.LLTokenizer = field(repr=False)
    vocab_size: int
    tokenizer_size: int
    eos_token_ids: tuple[int, ...]
    fingerprint: str
    tokenizer_json: str = field(default="", repr=False)
    """The tokenizer's ``tokenizer.json`` text: what ``from_tokenizer_json`` rebuilds it from
    (in a compile worker process; the llguidance tokenizer itself is not picklable)."""
    _by_bytes: dict[bytes, tuple[int, ...]] = field(default_factory=dict, init=False, repr=False)
    """Bytes -> the plain tokens spelling them (built on first use: ``prefix_tokens``)."""

    @classmethod
    def from_hf(
        cls,
        tokenizer: Any,
        vocab_size: int | None = None,
        *,
        eos_token_ids: Iterable[int] | None = None,
    ) -> TokenVocab:
        """Build from a Hugging Face fast tokenizer (byte-level BPE, SentencePiece with byte
        fallback, added and special tokens are all read from its ``tokenizer.json``).

        ``eos_token_ids`` are added to the tokenizer's own EOS token."""
        text, size = _tokenizer_json(tokenizer)
        vocab_size = size if vocab_size is None else vocab_size
        if vocab_size < size:
            raise ValueError(f"vocab_size {vocab_size} is below the tokenizer's {size} tokens")
        eos = _eos_ids(tokenizer, eos_token_ids)
        if not eos or max(eos) >= vocab_size:
            raise ValueError(f"bad EOS token ids {eos} for vocab_size {vocab_size}")
        return cls.from_tokenizer_json(text, vocab_size, size, eos)

    @classmethod
    def from_tokenizer_json(
        cls, text: str, vocab_size: int, tokenizer_size: int, eos_token_ids: tuple[int, ...]
    ) -> TokenVocab:
        """Rebuild from the fields ``from_hf`` computed (no transformers needed)."""
        eos = tuple(eos_token_ids)
        llg_tok = llguidance.LLTokenizer(text, n_vocab=vocab_size, eos_token=list(eos))
        digest = hashlib.sha256(text.encode())
        digest.update(f"{vocab_size}|{eos}".encode())
        return cls(llg_tok, vocab_size, tokenizer_size, eos, digest.hexdigest()[:16], text)

    def token_bytes(self, token_id: int) -> bytes:
        """The exact bytes of one token (a special token's text; b"" for padding ids)."""
        if not 0 <= token_id < self.tokenizer_size:
            return b""
        return self.llg_tokenizer.decode_bytes([token_id])

    def decode_bytes(self, token_ids: list[int]) -> bytes:
        return self.llg_tokenizer.decode_bytes([t for t in token_ids if t < self.tokenizer_size])

    def prefix_tokens(self, data: bytes) -> list[int]:
        """Every plain (not special) token whose bytes are a non-empty prefix of ``data`` (of
        its first ``PREFIX_BYTES``)."""
        if not self._by_bytes:
            by: dict[bytes, list[int]] = {}
            for t in range(self.tokenizer_size):
                if not self.llg_tokenizer.is_special_token(t):
                    by.setdefault(self.token_bytes(t), []).append(t)
            self._by_bytes.update((b, tuple(ids)) for b, ids in by.items() if b)
        heads = (data[:k] for k in range(1, min(len(data), PREFIX_BYTES) + 1))
        return [t for head in heads for t in self._by_bytes.get(head, ())]

    def is_special(self, token_id: int) -> bool:
        return 0 <= token_id < self.tokenizer_size and self.llg_tokenizer.is_special_token(token_id)


def special_token_ids(tokenizer: Any, ids: Iterable[int]) -> frozenset[int]:
    """Which of ``ids`` llguidance treats as special tokens of a Hugging Face ``tokenizer``:
    the special added tokens and the added tokens written like ``<...>``. Only those may be
    named ``<[id]>`` in a grammar (``llg.token_refs``); builds a throwaway ``LLTokenizer``."""
    text, size = _tokenizer_json(tokenizer)
    llg_tok = llguidance.LLTokenizer(text, n_vocab=size)
    return frozenset(i for i in ids if 0 <= i < size and llg_tok.is_special_token(i))


def _tokenizer_json(tokenizer: Any) -> tuple[str, int]:
    """A fast tokenizer's ``tokenizer.json`` text (no padding or truncation) and its size."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise ValueError("TokenVocab.from_hf needs a fast (tokenizers-backed) tokenizer")
    backend = copy(backend)
    backend.no_padding()
    backend.no_truncation()
    size = backend.get_vocab_size(with_added_tokens=True)
    size = max(size, max(tokenizer.get_vocab().values(), default=-1) + 1)
    return backend.to_str(), size


def _eos_ids(tokenizer: Any, extra: Iterable[int] | None) -> tuple[int, ...]:
    ids: list[int] = []
    own = getattr(tokenizer, "eos_token_id", None)
    if isinstance(own, int):
        ids.append(own)
    ids.extend(int(t) for t in (extra or ()))
    return tuple(dict.fromkeys(ids))
