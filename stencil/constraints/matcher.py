"""``Matcher``: one sequence's position in a compiled constraint."""

from __future__ import annotations

import ctypes

import llguidance
import numpy as np
import torch

from .bitmask import bitmask_words
from .grounding.grounded_spans import OUTSIDE, GroundedSpans, State
from .vocab import TokenVocab


class Matcher:
    """Per-sequence state. Not thread-safe; one owner at a time (the engine's guided stage).

    ``accept_token`` never raises: a rejected token returns False and leaves the state as it
    was. ``is_terminated`` is True once nothing but EOS can follow (or EOS was accepted);
    the engine may finish the sequence there. While the grammar can still continue but is
    complete (``is_accepting``), both EOS and continuations are allowed.

    With ``spans`` (a grounded JSON schema), the co-matcher's state is kept per accepted token,
    its span walk is ANDed into the mask inside a co-matched grounded string, and the tokens
    carrying more bytes after a quote than the grammar checks are checked whole.
    """

    __slots__ = (
        "_m",
        "_vocab",
        "_eos",
        "_num_tokens",
        "_stopped_eos",
        "_words",
        "_spans",
        "_ground",
        "_scratch",
        "_scratch_at",
    )

    def __init__(
        self, matcher: llguidance.LLMatcher, vocab: TokenVocab, spans: GroundedSpans | None = None
    ) -> None:
        self._m = matcher
        self._vocab = vocab
        self._eos = frozenset(vocab.eos_token_ids)
        self._num_tokens = 0
        self._stopped_eos = 0  # trailing EOS accepted once stopped: llguidance records none
        self._words = bitmask_words(vocab.vocab_size)
        self._spans = spans
        self._ground: list[State] = [OUTSIDE]
        self._scratch = np.zeros(self._words if spans else 0, np.uint32)  # the walk's spare row
        self._scratch_at = self._scratch.ctypes.data

    @property
    def num_tokens(self) -> int:
        """Tokens accepted since the start (or last reset), the bound for ``rollback``."""
        return self._num_tokens

    def accept_token(self, token_id: int) -> bool:
        if not 0 <= token_id < self._vocab.tokenizer_size or self._m.is_error():
            return False
        state = self._ground[-1]
        try:
            if token_id in self._eos and self._m.is_stopped():
                ok = True  # llguidance takes it but records no token: rollback counts it here
                self._stopped_eos += 1
            elif token_id in self._eos:
                ok = self._m.is_accepting() and self._m.consume_token(token_id)
            else:
                if self._spans is not None:
                    state = self._spans.step(state, self._vocab.token_bytes(token_id), self._m)
                    if state is None:
                        return False
                ok = self._m.validate_tokens([token_id]) == 1 and self._m.consume_token(token_id)
        except (ValueError, OverflowError, TypeError):
            return False
        if not ok:
            return False
        self._ground.append(state)
        self._num_tokens += 1
        return True

    def fill_next_token_bitmask(self, bitmask: torch.Tensor, row: int = 0) -> None:
        """Write the allowed next tokens into ``bitmask[row]`` (CPU, int32, C-contiguous)."""
        # no row view (torch's indexing is most of a fill's Python cost): the row's address
        if bitmask.dtype is not torch.int32 or not bitmask.is_cpu or bitmask.dim() != 2:
            raise ValueError("bitmask must be a 2-D int32 CPU tensor")
        width = bitmask.shape[1]
        if width < self._words:
            raise ValueError(f"bitmask rows need {self._words} words, got {width}")
        if bitmask.stride(1) != 1 and width > 1:
            raise ValueError("bitmask rows must be contiguous")
        if not 0 <= row < bitmask.shape[0]:
            raise IndexError(f"bitmask row {row} out of range")
        address = bitmask.data_ptr() + row * bitmask.stride(0) * 4
        self._m.unsafe_compute_mask_ptr(address, self._words * 4)
        self._allow_forced_prefixes(address)
        if self._spans is not None:
            self._spans.restrict(self._ground[-1], address, self._scratch_at)
            self._spans.refuse_long(self._ground[-1], address, self._m)
        if width > self._words:
            bitmask[row, self._words :] = 0

    def _allow_forced_prefixes(self, address: int) -> None:
        """Where the next bytes are forced, llguidance's mask allows only its own tokenization
        of them, which splits a word the model began where the model would not (after `Agn` of
        `Agnieszka`: `ies` only, where Qwen's tokenizer writes `iesz`): every token spelling a
        prefix of the forced bytes is as valid, so the mask allows them too."""
        forced = self._m.compute_ff_bytes()
        for t in self._vocab.prefix_tokens(forced) if forced else ():
            ctypes.c_uint32.from_address(address + 4 * (t >> 5)).value |= 1 << (t & 31)

    def is_terminated(self) -> bool:
        return self._m.is_stopped() and not self._m.is_error()

    def is_accepting(self) -> bool:
        """True when the output so far is complete (EOS is allowed now)."""
        return self._m.is_accepting()

    def rollback(self, num_tokens: int) -> None:
        """Undo the last ``num_tokens`` accepted tokens."""
        if not 0 <= num_tokens <= self._num_tokens:
            raise ValueError(f"cannot roll back {num_tokens} of {self._num_tokens} tokens")
        virtual = min(num_tokens, self._stopped_eos)
        if num_tokens > virtual and not self._m.rollback(num_tokens - virtual):
            return
        self._stopped_eos -= virtual
        self._num_tokens -= num_tokens
        del self._ground[len(self._ground) - num_tokens :]

    def reset(self) -> None:
        self._m.reset()
        self._num_tokens = self._stopped_eos = 0
        self._ground = [OUTSIDE]

    def find_jump_forward_string(self) -> str:
        """Text that every valid continuation starts with (may be empty)."""
        forced = self._m.compute_ff_bytes()
        for cut in range(len(forced), max(len(forced) - 4, -1), -1):
            try:
                return forced[:cut].decode()
            except UnicodeDecodeError:
                continue
        return ""

    def jump_forward_tokens(self) -> list[int]:
        """Tokens that are forced next (canonical tokenization of the forced text)."""
        return list(self._m.compute_ff_tokens())

    def error(self) -> str | None:
        """Why the matcher can go no further (an internal limit), or None."""
        return self._m.get_error() or None if self._m.is_error() else None
