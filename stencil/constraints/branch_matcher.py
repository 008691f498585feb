"""``BranchMatcher``: a ``calls_or_answer`` constraint whose answer schema has decode-time
checks (``CheckedMatcher``), applied to the answer branch only.

The union grammar (one llguidance matcher) masks both branches. Two more matchers follow the
calls grammar alone and the answer grammar alone, each for as long as the output can still be
its branch, so the branch of every position is known exactly (the union only says that one of
them is alive). The checks read the answer's bytes while the answer is alive; a token they
refuse is refused only when the calls cannot take it either. Once the answer is out, the mask
is the calls matcher's (the union's answer branch could still hold an answer a check refused).
The answer begins at the output's start, or, with ``answer_after``, after that token once the
calls are out (GPT-OSS's final channel: ``<|channel|>final<|message|>``).
"""

from __future__ import annotations

import llguidance
import numpy as np
import torch

from .checked_matcher import CheckedMatcher
from .matcher import Matcher
from .semantic.plan import SemanticPlan
from .semantic.tokens import TokenTable
from .vocab import TokenVocab

BEFORE, ANSWER, CALLS = range(3)
"""A position's branch: the answer has not begun, the answer is alive, only calls are."""


class BranchMatcher(CheckedMatcher):
    __slots__ = ("_calls", "_answer", "_after", "_phase", "_took")

    def __init__(
        self,
        union: llguidance.LLMatcher,
        calls: llguidance.LLMatcher,
        answer: llguidance.LLMatcher,
        answer_after: int | None,
        vocab: TokenVocab,
        plan: SemanticPlan,
        table: TokenTable,
    ) -> None:
        super().__init__(union, vocab, plan, table)
        self._calls = Matcher(calls, vocab)
        self._answer = Matcher(answer, vocab)
        self._after = answer_after
        self._phase = [ANSWER if answer_after is None else BEFORE]
        self._took: list[tuple[bool, bool]] = []  # per token: (the calls, the answer) took it

    @property
    def branch(self) -> int:
        """``BEFORE``, ``ANSWER`` or ``CALLS`` at the current position."""
        return self._phase[-1]

    def _calls_alive(self) -> bool:
        return self._calls.num_tokens == self._num_tokens  # it took every token so far

    def _calls_take(self, token_id: int) -> bool:
        """Whether the calls branch can take ``token_id`` next (no state change)."""
        return self._calls_alive() and _takes(self._calls, token_id)

    def _answer_words(self) -> np.ndarray:
        """The answer's own mask row: while the calls are alive too, the union's row holds call
        tokens the checks must not read (they are not JSON of the answer)."""
        row = torch.zeros((1, self._words), dtype=torch.int32)
        self._answer.fill_next_token_bitmask(row, 0)
        return row[0].numpy().view(np.uint32)

    def accept_token(self, token_id: int) -> bool:
        if self._failure is not None:
            return False
        phase, state = self._phase[-1], self._states[-1]
        calls_ok = self._calls_take(token_id)
        answer_ok, after = False, state
        if phase == ANSWER and _takes(self._answer, token_id):
            if token_id in self._eos:
                answer_ok = self._tracker.finish(state, self._buf)
            else:
                fed = self._tracker.feed(state, self._bytes(token_id), self._buf)
                answer_ok, after = fed is not None, fed or state
        if phase != BEFORE and not (answer_ok or calls_ok):
            return False
        if not Matcher.accept_token(self, token_id):
            return False
        if phase == ANSWER and not answer_ok:
            phase = CALLS
        elif phase == BEFORE and token_id == self._after and not calls_ok:
            phase = ANSWER
        if calls_ok:
            self._calls.accept_token(token_id)
        if answer_ok:
            self._answer.accept_token(token_id)
            self._buf += self._bytes(token_id)
        self._states.append(after)
        self._phase.append(phase)
        self._took.append((calls_ok, answer_ok))
        return True

    def fill_next_token_bitmask(self, bitmask: torch.Tensor, row: int = 0) -> None:
        phase = self._phase[-1]
        if phase == CALLS:
            self._calls.fill_next_token_bitmask(bitmask, row)
            return
        Matcher.fill_next_token_bitmask(self, bitmask, row)
        words = bitmask[row, : self._words].numpy().view(np.uint32)
        if self._failure is not None:
            words[:] = 0
            return
        if phase == BEFORE or not words.any():
            return
        armed = self._states[-1].armed(self._root_checked)
        candidates = words & self._answer_words() if armed and self._calls_alive() else words
        refused = self._refused(words, candidates)
        self._refuse(words, [t for t in refused if not self._calls_take(t)])

    def _done(self, terminated: bool) -> bool:
        calls = self._calls
        if self._calls_alive() and (calls.is_terminated() if terminated else calls.is_accepting()):
            return True
        return self._phase[-1] == ANSWER and self._tracker.finish(self._states[-1], self._buf)

    def is_accepting(self) -> bool:
        return self._m.is_accepting() and self._done(False)

    def is_terminated(self) -> bool:
        return Matcher.is_terminated(self) and self._done(True)

    def rollback(self, num_tokens: int) -> None:
        before = self._num_tokens
        super().rollback(num_tokens)
        undone = before - self._num_tokens
        if not undone:
            return
        gone = self._took[len(self._took) - undone :]
        del self._took[len(self._took) - undone :]
        del self._phase[len(self._phase) - undone :]
        for branch, n in (
            (self._calls, sum(c for c, _ in gone)),
            (self._answer, sum(a for _, a in gone)),
        ):
            if n:
                branch.rollback(n)

    def reset(self) -> None:
        super().reset()
        self._calls.reset()
        self._answer.reset()
        self._phase = [ANSWER if self._after is None else BEFORE]
        self._took = []

    def find_jump_forward_string(self) -> str:
        if self._phase[-1] == CALLS:
            return self._calls.find_jump_forward_string()
        if self._phase[-1] == BEFORE:
            return Matcher.find_jump_forward_string(self)
        return super().find_jump_forward_string()

    def jump_forward_tokens(self) -> list[int]:
        if self._phase[-1] == CALLS:
            return self._calls.jump_forward_tokens()
        if self._phase[-1] == BEFORE:
            return Matcher.jump_forward_tokens(self)
        return super().jump_forward_tokens()


def _takes(matcher: Matcher, token_id: int) -> bool:
    """Whether ``matcher`` can take ``token_id`` next (no state change)."""
    if token_id in matcher._eos:
        return matcher.is_accepting() or matcher.is_terminated()
    try:
        return matcher._m.validate_tokens([token_id]) == 1
    except (ValueError, OverflowError, TypeError):
        return False
