"""``CheckedMatcher``: a ``Matcher`` whose JSON schema has keywords no grammar expresses
exactly (``uniqueItems``, a ``oneOf`` not shown exclusive, ``if`` / ``then`` / ``else``,
``not``, ``contains``, some formats and patterns): the grammar masks everything it can, and
each value is checked with jsonschema's semantics the moment it completes.

A token that would complete a refused value is removed from the mask and refused by
``accept_token`` (state unchanged), so no sequence can finish with an invalid value; jump-forward
stops before such a token; EOS is allowed only when the whole output passes. When the checks
leave no token at all (every continuation is invalid, e.g. a set of booleans asked for a
third item), the matcher enters an error state: the mask is empty, every token is refused and
``error()`` says which keyword at which schema location could not be met.
"""

from __future__ import annotations

import llguidance
import numpy as np
import torch

from .grounding.grounded_spans import GroundedSpans
from .matcher import Matcher
from .semantic.masking import refused_tokens
from .semantic.plan import SemanticPlan
from .semantic.tokens import TokenTable
from .semantic.tracker import State, Tracker
from .vocab import TokenVocab


class CheckedMatcher(Matcher):
    __slots__ = ("_plan", "_table", "_tracker", "_states", "_buf", "_failure", "_root_checked")

    def __init__(
        self,
        matcher: llguidance.LLMatcher,
        vocab: TokenVocab,
        plan: SemanticPlan,
        table: TokenTable,
        spans: GroundedSpans | None = None,
    ) -> None:
        super().__init__(matcher, vocab, spans)
        self._plan = plan
        self._table = table
        self._tracker = Tracker(plan)
        self._states: list[State] = [self._tracker.initial()]
        self._buf = bytearray()
        self._failure: str | None = None
        self._root_checked = plan.root() is not None

    def _bytes(self, token_id: int) -> bytes:
        return self._table.bytes[token_id] if 0 <= token_id < len(self._table.bytes) else b""

    def accept_token(self, token_id: int) -> bool:
        if self._failure is not None:
            return False
        state = self._states[-1]
        if token_id in self._eos:
            if not self._tracker.finish(state, self._buf) or not super().accept_token(token_id):
                return False
            self._states.append(state)
            return True
        if not self._grammar_allows(token_id):
            return False  # the tracker reads only what the grammar allows (a prefix of JSON)
        data = self._bytes(token_id)
        after = self._tracker.feed(state, data, self._buf)
        if after is None or not super().accept_token(token_id):
            return False
        self._states.append(after)
        self._buf += data
        return True

    def _grammar_allows(self, token_id: int) -> bool:
        """Whether the grammar takes ``token_id`` now (no state change): a token off the mask
        (the close_on_length search tries some) must not reach the tracker."""
        if not 0 <= token_id < self._vocab.tokenizer_size or self._m.is_error():
            return False
        try:
            return self._m.validate_tokens([token_id]) == 1
        except (ValueError, OverflowError, TypeError):
            return False

    def fill_next_token_bitmask(self, bitmask: torch.Tensor, row: int = 0) -> None:
        super().fill_next_token_bitmask(bitmask, row)
        words = bitmask[row, : self._words].numpy().view(np.uint32)
        if self._failure is not None:
            words[:] = 0
            return
        self._refuse(words, self._refused(words, words))

    def _refused(self, words: np.ndarray, candidates: np.ndarray) -> list[int]:
        """The tokens of mask row ``words`` the checks refuse: EOS where the output so far
        fails, and among ``candidates`` those completing a value that fails."""
        state = self._states[-1]
        refused = [
            t
            for t in self._eos
            if (words[t >> 5] >> (t & 31)) & 1 and not self._tracker.finish(state, self._buf)
        ]
        # an empty row is the grammar's own dead end (llguidance reports it): nothing to try
        if state.armed(self._root_checked) and words.any():
            refused += refused_tokens(
                candidates, state, self._buf, self._tracker, self._plan, self._table
            )
        return refused

    def _refuse(self, words: np.ndarray, refused: list[int]) -> None:
        """Clear ``refused`` in mask row ``words``; none left is the error state."""
        if refused:
            ids = np.asarray(refused, dtype=np.int64)
            np.bitwise_and.at(words, ids >> 5, ~(np.uint32(1) << (ids & 31).astype(np.uint32)))
            if not words.any():
                what = self._plan.describe(self._tracker.failure)
                self._failure = f"no continuation satisfies {what} (decode-time check)"

    def is_accepting(self) -> bool:
        return self._m.is_accepting() and self._tracker.finish(self._states[-1], self._buf)

    def is_terminated(self) -> bool:
        """The grammar is done and the output may end here: a root scalar the grammar cannot
        extend (an integer 1..3 after "1") completes only now, so it is checked now too."""
        return super().is_terminated() and self._tracker.finish(self._states[-1], self._buf)

    def rollback(self, num_tokens: int) -> None:
        before = self._num_tokens
        super().rollback(num_tokens)
        undone = before - self._num_tokens
        if undone:
            del self._states[len(self._states) - undone :]
            del self._buf[self._states[-1].offset :]
            self._failure = None

    def reset(self) -> None:
        super().reset()
        self._states = [self._tracker.initial()]
        self._buf = bytearray()
        self._failure = None

    def find_jump_forward_string(self) -> str:
        text = super().find_jump_forward_string()
        if text and self._tracker.feed(self._states[-1], text.encode(), self._buf) is None:
            return ""
        return text

    def jump_forward_tokens(self) -> list[int]:
        """Forced tokens, up to the first one a check refuses (the mask then says more)."""
        state, history, out = self._states[-1], bytearray(self._buf), []
        for t in super().jump_forward_tokens():
            if t in self._eos:
                break
            data = self._bytes(t)
            state = self._tracker.feed(state, data, history)
            if state is None:
                break
            history += data
            out.append(t)
        return out

    def error(self) -> str | None:
        return self._failure or super().error()
