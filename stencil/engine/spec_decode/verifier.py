"""Verification of one sequence's drafts after the forward that computed them.

The forward gave k + 1 logits rows for a sequence with k drafts: row i follows draft i - 1 (row 0
follows its last pending token). The walk replays what the non-speculative engine does, one
sampled position at a time: mask the row with the matcher's state after the verified tokens,
sample (greedy, or rejection against the draft), append through the output processor (which also
appends forced tokens and checks every stop). While the appended tokens equal the next drafts,
the next row is valid and the walk goes on; at the first difference it stops. So greedy output is
the non-speculative output token for token, and the matcher only ever accepts verified tokens.

Then the drafts that matched count as computed (their KV is in place); the KV of the rest is
dropped: blocks past the sequence's tokens go back to both pools, and prefix-cache hashes only
ever cover computed, verified tokens."""

from __future__ import annotations

import logging

import torch

from stencil.engine.block_manager import BlockManager
from stencil.engine.guided import GuidedDecoding
from stencil.engine.metrics import EngineMetrics
from stencil.engine.output_processor import OutputProcessor
from stencil.engine.sampler import Sampler, raw_logprobs
from stencil.engine.sequence import Sequence
from stencil.engine.spec_decode.rejection_sampler import sample_against_draft

logger = logging.getLogger(__name__)


class Verifier:
    def __init__(
        self,
        guided: GuidedDecoding,
        sampler: Sampler,
        output: OutputProcessor,
        block_manager: BlockManager,
        metrics: EngineMetrics,
        ops,
    ) -> None:
        self.guided = guided
        self.sampler = sampler
        self.output = output
        self.bm = block_manager
        self.metrics = metrics
        self.ops = ops

    def verify(self, seq: Sequence, logits: torch.Tensor) -> int:
        """Accept ``seq``'s drafts that the target agrees with (how many: returned); ``logits
        [k + 1, vocab]``."""
        drafts, seq.spec_token_ids = seq.spec_token_ids, []
        base = seq.num_tokens
        try:
            self._walk(seq, logits, drafts)
        except Exception as e:  # ends this sequence only
            logger.exception("speculative verification failed for %s", seq.request_id)
            seq.finish("error", error=f"internal error while verifying: {type(e).__name__}")
        valid = verified_drafts(seq.token_ids[base:], drafts)
        seq.num_computed_tokens += valid
        self.metrics.spec_decode_num_draft_tokens_total += len(drafts)
        self.metrics.spec_decode_num_accepted_tokens_total += valid
        self.bm.commit(seq)
        self.bm.release_after(seq, seq.num_tokens)
        return valid

    def _walk(self, seq: Sequence, logits: torch.Tensor, drafts: list[int]) -> None:
        i = 0
        while True:
            row = logits[i]  # [vocab], follows the verified tokens so far
            unmasked = raw_logprobs(row.unsqueeze(0), [seq]).get(0)
            self.guided.apply(row.unsqueeze(0), [seq], self.ops)
            if seq.is_finished:  # the mask fill failed
                return
            draft = drafts[i] if i < len(drafts) else None
            sampled = sample_against_draft(self.sampler, row, seq, draft, unmasked)
            if sampled.failed or seq.is_finished:
                return
            before = seq.num_tokens
            self.output.append(seq, sampled.token, sampled.logprobs)
            new = seq.token_ids[before:]
            if seq.is_finished or not new or drafts[i : i + len(new)] != new:
                return
            i += len(new)


def split_rows(
    logits: torch.Tensor, seqs: list[Sequence]
) -> tuple[torch.Tensor, list[Sequence], list[tuple[Sequence, torch.Tensor]]]:
    """``logits [rows, vocab]`` from the forward -> (the plain rows, their sequences) and each
    drafting sequence with its k + 1 rows."""
    if not any(s.spec_token_ids for s in seqs):
        return logits, seqs, []
    plain_rows: list[int] = []
    plain: list[Sequence] = []
    spec: list[tuple[Sequence, torch.Tensor]] = []
    r = 0
    for seq in seqs:
        n = 1 + len(seq.spec_token_ids)
        if n == 1:
            plain_rows.append(r)
            plain.append(seq)
        else:
            spec.append((seq, logits[r : r + n]))  # [k + 1, vocab]
        r += n
    assert r == logits.shape[0], "logits rows do not match the drafts"
    return logits[plain_rows], plain, spec  # [plain rows, vocab]


def verified_drafts(appended: list[int], drafts: list[int]) -> int:
    """How many drafts count as computed: those equal to the tokens appended after them, but
    never the last appended token (a sequence always keeps one token to compute, whose row
    samples next)."""
    n = 0
    for x, y in zip(appended[:-1], drafts, strict=False):
        if x != y:
            break
        n += 1
    return n
