"""Constraint-aware drafts for each running sequence, set on ``seq.spec_token_ids`` before the
scheduler runs.

Drafts mirror what the non-speculative engine would append: a proposed token, then the tokens
the constraint forces after it (jump-forward, free: they need no proposal), then the next
proposal from the context so far. Where the constraint forces text but no token (``":"`` after a
key could also start a longer token), the text's own tokenization is drafted too (free: the
model nearly always writes forced text that way, and a wrong guess costs one row). Each proposed token is checked against the sequence's matcher
and the drafts are cut at the first one it refuses; the matcher is rolled back to where it was
(only verified tokens are ever accepted for good)."""

from __future__ import annotations

from typing import Any

from stencil.engine.sequence import Sequence
from stencil.engine.spec_decode.config import SpeculativeConfig
from stencil.engine.spec_decode.ngram_proposer import NgramProposer
from stencil.engine.spec_decode.text_proposer import TextProposer

MAX_FORCED = 64  # forced tokens taken as drafts per step, on top of num_speculative_tokens


class Drafter:
    def __init__(self, config: SpeculativeConfig, tokenizer: Any, draft_model=None) -> None:
        self.config = config
        self.proposer = NgramProposer(config.prompt_lookup_min or 1, config.prompt_lookup_max or 1)
        self.draft_model = draft_model  # a DraftModel (draft_model.py) proposes instead
        self.tokenizer = tokenizer
        self.text_proposer = TextProposer(tokenizer)
        self._encoded: dict[str, list[int]] = {}  # forced text -> its tokens (a few distinct)
        self._prompts: dict[int, str] = {}  # seq_id -> its prompt's text, while it runs

    def propose(self, running: list[Sequence]) -> None:
        """Set every running sequence's drafts (none while the batch is too large)."""
        off = len(running) > self.config.disable_by_batch_size
        live = {seq.seq_id for seq in running}
        self._prompts = {i: t for i, t in self._prompts.items() if i in live}
        if self.draft_model is not None:
            self.draft_model.retain(live)
            for seq in running:
                seq.spec_token_ids = []
            seqs = [] if off else [s for s in running if _eligible(s)]
            self.draft_model.propose(seqs, self.config.num_speculative_tokens, self._force)
            return
        for seq in running:
            seq.spec_token_ids = [] if off or not _eligible(seq) else self.drafts(seq)

    def release(self, seq: Sequence) -> None:
        """``seq`` finished, was aborted or preempted: free what the draft model holds for it."""
        if self.draft_model is not None:
            self.draft_model.release(seq.seq_id)

    def drafts(self, seq: Sequence) -> list[int]:
        room = seq.max_len - seq.num_tokens - 1  # the bonus token must fit too
        k = min(self.config.num_speculative_tokens, room)
        if k <= 0:
            return []
        matcher = seq.matcher if seq.reasoning_done else None
        if matcher is None:
            return self._propose(seq, seq.token_ids, k)
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
        self._force(matcher, drafts, room)  # forced text left by the last step
        while proposed < k:
            guesses = self._propose(seq, seq.token_ids + drafts, k - proposed)
            if not guesses:
                return
            for token in guesses:
                if len(drafts) >= room or not matcher.accept_token(token):
                    return
                drafts.append(token)
                proposed += 1
                if matcher.is_terminated():
                    return
                if self._force(matcher, drafts, room):
                    break  # propose again after the forced run

    def _propose(self, seq: Sequence, context: list[int], k: int) -> list[int]:
        """Token n-gram lookup, else the same lookup on text (see ``text_proposer.py``)."""
        guesses = self.proposer.propose(context, k)
        if guesses:
            return guesses
        text = self._prompts.get(seq.seq_id)
        if text is None:
            text = self._prompts[seq.seq_id] = self.tokenizer.decode(
                seq.token_ids[: seq.prompt_len]
            )
        return self.text_proposer.propose(text, context, k)

    def _force(self, matcher, drafts: list[int], room: int) -> bool:
        """Append the tokens the constraint forces now (as jump-forward would), then the
        tokenization of the text it forces beyond them; True if any."""
        start = len(drafts)
        while len(drafts) - start < MAX_FORCED:
            forced = matcher.jump_forward_tokens() or self._encode(matcher)
            forced = forced[: room - len(drafts)]
            if not forced:
                break
            for t in forced:
                if not matcher.accept_token(t):
                    return len(drafts) > start
                drafts.append(t)
        return len(drafts) > start

    def _encode(self, matcher) -> list[int]:
        """The tokens of the text every continuation starts with ([] where there is none)."""
        text = matcher.find_jump_forward_string()
        if not text:
            return []
        tokens = self._encoded.get(text)
        if tokens is None:
            if len(self._encoded) >= 4096:
                self._encoded.clear()
            tokens = self._encoded[text] = self.tokenizer.encode(text, add_special_tokens=False)
        return tokens


def _eligible(seq: Sequence) -> bool:
    """Decoding (its prompt computed), not an embedding, no siblings waiting to fork from it."""
    return (
        not seq.is_finished
        and seq.num_computed_tokens >= seq.prompt_len
        and seq.pooler is None
        and not seq.pending_forks
        and seq.fork_of is None
    )
