"""Constraint-aware drafts for each running sequence, set on ``seq.spec_token_ids`` before the
scheduler runs.

Drafts mirror what the non-speculative engine would append: a proposed token, then the tokens
the constraint forces after it (jump-forward, free: they need no proposal), then the next
proposal from the context so far. Each proposed token is checked against the sequence's matcher
and the drafts are cut at the first one it refuses; the matcher is rolled back to where it was
(only verified tokens are ever accepted for good)."""

from __future__ import annotations

from stencil.engine.sequence import Sequence
from stencil.engine.spec_decode.config import SpeculativeConfig
from stencil.engine.spec_decode.ngram_proposer import NgramProposer

MAX_FORCED = 64  # forced tokens taken as drafts per step, on top of num_speculative_tokens


class Drafter:
    def __init__(self, config: SpeculativeConfig) -> None:
        self.config = config
        self.proposer = NgramProposer(config.prompt_lookup_min, config.prompt_lookup_max)

    def propose(self, running: list[Sequence]) -> None:
        """Set every running sequence's drafts (none while the batch is too large)."""
        off = len(running) > self.config.disable_by_batch_size
        for seq in running:
            seq.spec_token_ids = [] if off or not _eligible(seq) else self.drafts(seq)

    def drafts(self, seq: Sequence) -> list[int]:
        room = seq.max_len - seq.num_tokens - 1  # the bonus token must fit too
        k = min(self.config.num_speculative_tokens, room)
        if k <= 0:
            return []
        matcher = seq.matcher if seq.reasoning_done else None
        if matcher is None:
            return self.proposer.propose(seq.token_ids, k)
        drafts: list[int] = []
        try:
            self._guided(seq, matcher, drafts, k, room)
        finally:
            matcher.rollback(len(drafts))
        return drafts

    def _guided(self, seq: Sequence, matcher, drafts: list[int], k: int, room: int) -> None:
        """Proposals the matcher accepts, each followed by the tokens it then forces; a forced
        run makes the next proposal come from the longer context."""
        proposed = 0
        while proposed < k:
            guesses = self.proposer.propose(seq.token_ids + drafts, k - proposed)
            if not guesses:
                return
            for token in guesses:
                if len(drafts) >= room or not matcher.accept_token(token):
                    return
                drafts.append(token)
                proposed += 1
                if matcher.is_terminated():
                    return
                if _force(matcher, drafts, room):
                    break  # propose again after the forced run


def _force(matcher, drafts: list[int], room: int) -> bool:
    """Append the tokens the constraint forces now (as jump-forward would); True if any."""
    start = len(drafts)
    while len(drafts) - start < MAX_FORCED:
        forced = matcher.jump_forward_tokens()[: room - len(drafts)]
        if not forced:
            break
        for t in forced:
            if not matcher.accept_token(t):
                return len(drafts) > start
            drafts.append(t)
    return len(drafts) > start


def _eligible(seq: Sequence) -> bool:
    """Decoding (its prompt computed), not an embedding, no siblings waiting to fork from it."""
    return (
        not seq.is_finished
        and seq.num_computed_tokens >= seq.prompt_len
        and seq.pooler is None
        and not seq.pending_forks
        and seq.fork_of is None
    )
