"""Speculative sampling of one verified row against its draft (Leviathan et al. 2023, Chen et
al. 2023). Drafts here are proposed with certainty (prompt lookup, forced tokens), so the draft
distribution q is a point mass: keep the draft with probability p(draft), else draw from the
residual max(p - q, 0), i.e. p with the draft taken out. The token then follows p exactly."""

from __future__ import annotations

import torch

from stencil.engine.sampler import SampledRow, Sampler, race
from stencil.engine.sequence import Sequence


def sample_against_draft(
    sampler: Sampler,
    row: torch.Tensor,
    seq: Sequence,
    draft: int | None,
    unmasked: torch.Tensor | None = None,
) -> SampledRow:
    """The token for one masked ``row [vocab]`` of ``seq``: greedy rows and rows without a draft
    (the bonus row) sample as without speculation; sampled rows by rejection against ``draft``.
    ``unmasked``: the row's logprobs before the mask, where the sequence asks raw logprobs."""
    if draft is None or seq.params.greedy:
        return sampler(row.unsqueeze(0), [seq], {0: unmasked} if unmasked is not None else None)[0]
    k = seq.params.logprobs
    raw = None
    if k is not None:
        raw = unmasked if unmasked is not None else torch.log_softmax(row, dim=-1)
    sampler.process(row, seq)
    probs = sampler.probs(row, seq)  # [vocab], top-p / min-p leave it unnormalized
    probs = probs / probs.sum()
    if float(torch.rand((), generator=seq.generator)) < float(probs[draft]):
        token = draft
    else:
        probs[draft] = 0.0
        token = race(probs, seq.generator)
    return SampledRow(token, sampler.logprobs(raw, token, k) if raw is not None else None)
