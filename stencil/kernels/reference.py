"""Pure-torch kernels: the CPU path of the engine and the oracles of the Triton twins.

Cache layout (vLLM's): ``k_cache``/``v_cache`` are ``[num_blocks, block_size, num_kv_heads, head_dim]``;
token ``t`` of a sequence lives in slot ``block_table[t // block_size] * block_size + t % block_size``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def write_kv(
    key: torch.Tensor,  # [T, kv_heads, dim]
    value: torch.Tensor,  # [T, kv_heads, dim]
    k_cache: torch.Tensor,  # [num_blocks, block_size, kv_heads, dim]
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,  # [T] int64
) -> None:
    """Scatter the step's new keys/values into their cache slots."""
    kv_heads, dim = key.shape[1], key.shape[2]
    k_cache.view(-1, kv_heads, dim).index_copy_(0, slot_mapping, key.to(k_cache.dtype))
    v_cache.view(-1, kv_heads, dim).index_copy_(0, slot_mapping, value.to(v_cache.dtype))


def gather_kv(
    cache: torch.Tensor,  # [num_blocks, block_size, kv_heads, dim]
    block_tables: torch.Tensor,  # [B, max_blocks] int32
    max_len: int,
) -> torch.Tensor:  # [B, kv_heads, max_len, dim]
    b, nb = block_tables.shape
    bs = cache.shape[1]
    need = min(nb, -(-max_len // bs))
    g = cache[block_tables[:, :need].long()]  # [B, need, bs, kv_heads, dim]
    g = g.reshape(b, need * bs, cache.shape[2], cache.shape[3])[:, :max_len]
    return g.transpose(1, 2)


def paged_attention(
    q: torch.Tensor,  # [T, heads, dim], the step's queries, sequences concatenated
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,  # [B, max_blocks] int32
    cu_seqlens_q: list[int],  # B + 1 offsets into T
    context_lens: list[int],  # [B] tokens in cache per sequence, this step's included
    scale: float,
    sliding_window: int | None = None,
) -> torch.Tensor:  # [T, heads, dim]
    """Causal attention of each sequence's new queries over its cached keys (prefix + new).

    Query ``i`` of a sequence with ``q_len`` new tokens sits at position ``ctx - q_len + i``.
    Single-token rows (decode) run as one batched call; longer rows (prefill chunks) one call each.
    """
    out = torch.empty_like(q)
    q_lens = [cu_seqlens_q[i + 1] - cu_seqlens_q[i] for i in range(len(context_lens))]
    decode = [i for i, n in enumerate(q_lens) if n == 1]
    if decode:
        rows = torch.tensor([cu_seqlens_q[i] for i in decode])
        ctx = torch.tensor([context_lens[i] for i in decode])
        out[rows] = _attend(q[rows].unsqueeze(2), k_cache, v_cache, block_tables[decode],
                            ctx, ctx - 1, scale, sliding_window).squeeze(2)
    for i, n in enumerate(q_lens):
        if n <= 1:
            continue
        s, c = cu_seqlens_q[i], context_lens[i]
        qi = q[s : s + n].transpose(0, 1).unsqueeze(0)  # [1, heads, n, dim]
        pos = torch.arange(c - n, c).unsqueeze(0)
        o = _attend(qi, k_cache, v_cache, block_tables[i : i + 1], torch.tensor([c]), pos,
                    scale, sliding_window)
        out[s : s + n] = o[0].transpose(0, 1)
    return out


def _attend(
    q: torch.Tensor,  # [B, heads, n, dim]
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,  # [B, max_blocks]
    ctx: torch.Tensor,  # [B]
    q_pos: torch.Tensor,  # [B, n] absolute positions of the queries
    scale: float,
    sliding_window: int | None,
) -> torch.Tensor:  # [B, heads, n, dim]
    max_len = int(ctx.max())
    k = gather_kv(k_cache, block_tables, max_len).to(q.dtype)
    v = gather_kv(v_cache, block_tables, max_len).to(q.dtype)
    kpos = torch.arange(max_len)
    qp = q_pos.reshape(q.shape[0], -1, 1)  # [B, n, 1]
    mask = (kpos <= qp) & (kpos < ctx.view(-1, 1, 1))  # [B, n, max_len]
    if sliding_window is not None:
        mask &= kpos > qp - sliding_window
    mask = mask.unsqueeze(1).to(q.device)  # [B, 1, n, max_len], built on the CPU
    return F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, scale=scale, enable_gqa=k.shape[1] != q.shape[1]
    )


def apply_token_bitmask_inplace(
    logits: torch.Tensor,  # [R, V] float
    bitmask: torch.Tensor,  # [R, W] int32, bit j of word w = token 32 * w + j allowed
    indices: torch.Tensor | None = None,  # rows of logits (and bitmask) to mask; None = all
) -> None:
    """Set ``logits`` to -inf where the bitmask bit is 0. Tokens beyond ``32 * W`` are disallowed."""
    rows = torch.arange(logits.shape[0]) if indices is None else indices.long()
    if rows.numel() == 0:
        return
    vocab = logits.shape[1]
    allowed = unpack_bitmask(bitmask[rows], vocab)  # [r, V] bool
    # logits made under torch.inference_mode() (the model runner) can only be updated in place
    # inside it; the Triton twin writes through the pointer either way
    with torch.inference_mode():
        sub = logits[rows]
        sub.masked_fill_(~allowed, float("-inf"))
        logits[rows] = sub


def unpack_bitmask(bitmask: torch.Tensor, vocab: int) -> torch.Tensor:  # [R, vocab] bool
    shifts = torch.arange(32, dtype=torch.int32, device=bitmask.device)
    bits = (bitmask.unsqueeze(-1) >> shifts) & 1  # [R, W, 32]
    flat = bits.reshape(bitmask.shape[0], -1).bool()
    if flat.shape[1] >= vocab:
        return flat[:, :vocab]
    pad = torch.zeros(bitmask.shape[0], vocab - flat.shape[1], dtype=torch.bool, device=bitmask.device)
    return torch.cat([flat, pad], dim=1)
