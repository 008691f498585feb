"""Speculative sampling follows the target distribution: the rejection step against a draft
(chi-square against the exact target), and the engine's sampled output with vs without drafts
(chi-square homogeneity of the first tokens decoded with drafts on a tiny model)."""

from __future__ import annotations

import gc

import pytest
import torch

from stencil import SamplingParams
from stencil.engine.sampler import Sampler
from stencil.engine.sequence import Sequence
from stencil.engine.spec_decode.rejection_sampler import sample_against_draft
from stencil.testing.tiny_models import make_llm

P_MIN = 1e-3  # a true target fails a test at this level 1 time in 1,000


def chi2_pvalue(observed: list[list[float]], expected: list[list[float]], df: int) -> float:
    """Pearson's chi-square statistic's upper tail (the regularized upper incomplete gamma)."""
    stat = sum(
        (o - e) ** 2 / e
        for ro, re in zip(observed, expected, strict=False)
        for o, e in zip(ro, re, strict=False)
    )
    return float(torch.special.gammaincc(torch.tensor(df / 2), torch.tensor(stat / 2)))


def homogeneity_pvalue(table: list[list[int]]) -> float:
    """Chi-square test that the rows of a contingency table come from one distribution."""
    total = sum(map(sum, table))
    cols = [sum(col) for col in zip(*table, strict=False)]
    expected = [[sum(row) * c / total for c in cols] for row in table]
    return chi2_pvalue(table, expected, (len(table) - 1) * (len(cols) - 1))


def _seq(params: SamplingParams, seed: int) -> Sequence:
    gen = torch.Generator().manual_seed(seed)
    return Sequence(1, "r", 0, [1, 2, 3], 3, params, 64, gen)


@pytest.mark.parametrize(
    ("params", "draft"),
    [
        (SamplingParams(temperature=1.0), 0),  # the likeliest token drafted
        (SamplingParams(temperature=0.7), 5),  # an unlikely one
        (SamplingParams(temperature=1.3, top_k=4), 7),  # a draft top-k removes: never kept
        (SamplingParams(temperature=1.0, top_p=0.8), 2),
    ],
)
def test_rejection_step_follows_target(params, draft):
    logits = torch.tensor([2.0, 1.5, 1.0, 0.5, 0.0, -0.5, -1.0, -1.5])  # [vocab]
    sampler = Sampler({99}, lambda t: (str(t), None))
    seq = _seq(params, seed=7)
    target = sampler.probs(logits.clone(), seq).numpy()
    n = 20000
    counts = [0] * len(logits)
    for _ in range(n):
        counts[sample_against_draft(sampler, logits.clone(), seq, draft).token] += 1
    support = [i for i, p in enumerate(target) if p > 0]
    assert all(counts[i] == 0 for i in range(len(logits)) if i not in support)
    expected = [target[i] * n / sum(target[j] for j in support) for i in support]
    observed = [counts[i] for i in support]
    assert chi2_pvalue([observed], [expected], len(support) - 1) > P_MIN


def _sampled_with_and_without(target, spec_cfg, kv_bytes, prompt, positions: slice):
    """The tokens at ``positions`` of 200 seeded samples (temperature 1, top-k 3) without and
    with speculation, one engine at a time (the test process stays small), and the speculative
    engine's metrics."""
    kw = dict(max_model_len=64, kv_cache_memory=kv_bytes)
    params = [
        SamplingParams(temperature=1.0, top_k=3, max_tokens=4, ignore_eos=True, seed=s)
        for s in range(200)
    ]

    def pairs(llm):
        outs = llm.generate([prompt] * len(params), params, use_tqdm=False)
        return [tuple(o.outputs[0].token_ids[positions]) for o in outs]

    a = pairs(make_llm(target, **kw))
    gc.collect()
    spec = make_llm(target, speculative_config=spec_cfg, **kw)
    return a, pairs(spec), spec.get_metrics()


def _contingency(a: list, b: list) -> list[list[int]]:
    """Counts of each outcome in ``a`` and ``b``; the outcomes seen fewer than 10 times pooled
    in one cell (dropped where that too is under 10)."""
    cells = sorted(set(a) | set(b))
    table = [[a.count(c) for c in cells], [b.count(c) for c in cells]]
    keep = [i for i in range(len(cells)) if table[0][i] + table[1][i] >= 10]
    rare = [sum(row) - sum(row[i] for i in keep) for row in table]
    return [
        [row[i] for i in keep] + ([r] if sum(rare) >= 10 else [])
        for row, r in zip(table, rare, strict=True)
    ]


def test_engine_sampled_tokens_match_without_drafts():
    """On a repetitive prompt the embedded model's drafts (its Q4_1 file, as ``LLM()`` loads it)
    are prompt lookups it often accepts; the (3rd, 4th) tokens decoded with them follow the same
    distribution as without (top-k 3, 200 seeds each)."""
    from stencil.engine.models.default_model import default_model_file

    spec_cfg = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 2,
                "prompt_lookup_min": 1, "disable_by_batch_size": 1000}  # fmt: skip
    a, b, metrics = _sampled_with_and_without(
        default_model_file(), spec_cfg, 256 << 20, "1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1,", slice(2, 4)
    )
    assert metrics["spec_decode_num_accepted_tokens_total"] > 0
    table = _contingency(a, b)
    assert len(table[0]) >= 2 and homogeneity_pvalue(table) > P_MIN


def test_engine_sampled_tokens_match_with_a_draft_model():
    """Drafts proposed by a draft model (the embedded Q4_1 file, kept quantized, drafting for
    itself: its proposals are its greedy tokens, which sampling at temperature 1 often refuses)
    and verified by rejection sampling: the first two tokens (the second one verified against a
    draft) follow the same distribution as without drafts (top-k 3, 200 seeds each)."""
    from stencil.engine.models.default_model import default_model_file

    target = default_model_file()
    spec_cfg = {"method": "draft_model", "model": str(target),
                "num_speculative_tokens": 3, "disable_by_batch_size": 1000}  # fmt: skip
    # 96 MiB: 1,000 tokens per pool with the draft
    a, b, metrics = _sampled_with_and_without(
        target, spec_cfg, 96 << 20, "My favourite fruit is", slice(0, 2)
    )
    assert metrics["spec_decode_num_accepted_tokens_total"] > 0
    table = _contingency(a, b)
    assert len(table[0]) >= 4 and homogeneity_pvalue(table) > P_MIN
