"""Shared inputs and independent oracles for the kernel tests (no Triton import here)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

# (logits vocab, bitmask words): 70 and 1000 are not multiples of 32; words * 32 < vocab leaves an
# uncovered (disallowed) tail; words * 32 > vocab has spare bits; 2500 spans two kernel blocks.
BITMASK_CASES = {
    "v70-w3": (70, 3),
    "v1000-w32": (1000, 32),
    "v1000-w25-uncovered-tail": (1000, 25),
    "v64-w2": (64, 2),
    "v33-w4-spare-words": (33, 4),
    "v2500-w79-two-blocks": (2500, 79),
}


def random_bitmask(rows: int, words: int, gen: torch.Generator) -> torch.Tensor:
    """``int32[rows, words]`` of random bits with all-zero and all-one words mixed in."""
    bits = torch.randint(-(2**31), 2**31, (rows, words), dtype=torch.int64, generator=gen)
    bits = bits.to(torch.int32)
    pick = torch.randint(0, 4, (rows, words), generator=gen)
    bits[pick == 0] = 0
    bits[pick == 1] = -1  # every bit set
    return bits


BITMASK_INDICES = {"all": None, "3-0": [3, 0], "1": [1], "none": []}  # rows masked of 4


def check_bitmask_against_reference(apply, case: str, dtype: torch.dtype, indices) -> None:
    """``apply`` (a twin of ``reference.apply_token_bitmask_inplace``) writes the same logits as
    the reference on 4 random rows of ``BITMASK_CASES[case]``, masking rows ``indices``."""
    from stencil.kernels import reference

    vocab, words = BITMASK_CASES[case]
    gen = torch.Generator().manual_seed(vocab * 7 + words)
    logits = torch.randn(4, vocab, generator=gen).to(dtype)
    bitmask = random_bitmask(4, words, gen)
    idx = None if indices is None else torch.tensor(indices, dtype=torch.int32)
    expect, got = logits.clone(), logits.clone()
    reference.apply_token_bitmask_inplace(expect, bitmask, idx)
    apply(got, bitmask, idx)
    assert torch.equal(got, expect)


def naive_mask(logits: torch.Tensor, bitmask: torch.Tensor, rows: list[int]) -> torch.Tensor:
    """``logits`` with -inf at every token of ``rows`` whose bit is 0 or missing, bit by bit."""
    out = logits.clone()
    words = bitmask.shape[1]
    for r in rows:
        for tok in range(logits.shape[1]):
            w, j = divmod(tok, 32)
            if not (w < words and (int(bitmask[r, w]) >> j) & 1 == 1):
                out[r, tok] = float("-inf")
    return out


@dataclass(frozen=True)
class AttnCase:
    heads: int
    kv_heads: int
    dim: int
    block_size: int
    q_lens: tuple[int, ...]
    ctx: tuple[int, ...]
    window: int | None = None


MIXED_Q, MIXED_CTX = (1, 9, 1, 1, 19, 3), (1, 9, 40, 6, 33, 17)  # decode + prefill + chunks
ATTN_CASES = {
    "mha-bs4": AttnCase(2, 2, 8, 4, MIXED_Q, MIXED_CTX),
    "gqa2-bs16": AttnCase(4, 2, 16, 16, MIXED_Q, MIXED_CTX),
    "mqa-bs4-dim20": AttnCase(4, 1, 20, 4, MIXED_Q, MIXED_CTX),
    "gqa2-bs4-window5": AttnCase(4, 2, 8, 4, MIXED_Q, MIXED_CTX, window=5),
    "mqa-bs16-window1": AttnCase(4, 1, 8, 16, MIXED_Q, MIXED_CTX, window=1),
    "gqa2-bs16-window-wide": AttnCase(4, 2, 8, 16, MIXED_Q, MIXED_CTX, window=64),
    "decode-only": AttnCase(4, 2, 8, 4, (1, 1, 1), (1, 50, 17)),
    "prefill-only-long": AttnCase(4, 1, 8, 16, (37,), (37,), window=9),
    "empty-row": AttnCase(4, 2, 8, 4, (2, 0, 1), (5, 3, 4)),
    "gqa3-bs16-dim64": AttnCase(9, 3, 64, 16, MIXED_Q, MIXED_CTX),  # SmolLM2's heads
    "gqa2-bs16-dim32-window7": AttnCase(4, 2, 32, 16, MIXED_Q, MIXED_CTX, window=7),
}


def make_attn_inputs(case: AttnCase, dtype: torch.dtype, seed: int = 0) -> dict[str, Any]:
    """Keyword arguments of ``paged_attention``: random queries (a strided view, like a qkv
    split), a randomly filled paged cache, shuffled block tables padded with ``-1``."""
    gen = torch.Generator().manual_seed(seed)
    need = [-(-c // case.block_size) for c in case.ctx]
    num_blocks = sum(need) + 3
    perm = torch.randperm(num_blocks, generator=gen).tolist()
    tables = torch.full((len(case.ctx), max(need) + 2), -1, dtype=torch.int32)
    for b, n in enumerate(need):
        tables[b, :n] = torch.tensor(perm[:n], dtype=torch.int32)
        perm = perm[n:]
    shape = (num_blocks, case.block_size, case.kv_heads, case.dim)
    cu = [0]
    for n in case.q_lens:
        cu.append(cu[-1] + n)
    fused = torch.randn(cu[-1], case.heads + 2, case.dim, generator=gen)
    return {
        "q": fused[:, 1 : case.heads + 1].to(dtype),  # [T, heads, dim]
        "k_cache": torch.randn(shape, generator=gen).to(dtype),
        "v_cache": torch.randn(shape, generator=gen).to(dtype),
        "block_tables": tables,
        "cu_seqlens_q": cu,
        "context_lens": list(case.ctx),
        "scale": case.dim**-0.5,
        "sliding_window": case.window,
    }


def naive_attention(
    q: torch.Tensor,  # [T, heads, dim]
    k_cache: torch.Tensor,  # [num_blocks, block_size, kv_heads, dim]
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    cu_seqlens_q: list[int],
    context_lens: list[int],
    scale: float,
    sliding_window: int | None,
    sinks: torch.Tensor | None = None,  # [heads]: one more logit per head, no value
    softcap: float | None = None,  # Gemma 2: scores = softcap * tanh(scores / softcap)
) -> torch.Tensor:  # [T, heads, dim] float64
    """Dense fp64 attention, one query at a time, keys fetched slot by slot."""
    out = torch.zeros(q.shape, dtype=torch.float64)
    bs, group = k_cache.shape[1], q.shape[1] // k_cache.shape[2]
    for b, ctx in enumerate(context_lens):
        slots = [(int(block_tables[b, t // bs]), t % bs) for t in range(ctx)]
        keys = torch.stack([k_cache[blk, off] for blk, off in slots]).double()  # [ctx, kvh, d]
        vals = torch.stack([v_cache[blk, off] for blk, off in slots]).double()
        keys, vals = keys.repeat_interleave(group, 1), vals.repeat_interleave(group, 1)
        n = cu_seqlens_q[b + 1] - cu_seqlens_q[b]
        for i in range(n):
            pos, row = ctx - n + i, cu_seqlens_q[b] + i
            lo = 0 if sliding_window is None else max(0, pos - sliding_window + 1)
            s = torch.einsum("hd,lhd->hl", q[row].double(), keys[lo : pos + 1]) * scale
            if softcap is not None:
                s = softcap * torch.tanh(s / softcap)
            if sinks is not None:
                s = torch.cat((s, sinks.double().view(-1, 1)), dim=1)
            p = s.softmax(-1)[:, : pos + 1 - lo]
            out[row] = torch.einsum("hl,lhd->hd", p, vals[lo : pos + 1])
    return out
