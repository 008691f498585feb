"""Triton twin of ``reference.paged_attention``: varlen causal attention over the paged KV cache.

Work is split into tiles on the host: a tile is up to ``BLOCK_Q`` consecutive query tokens of one
sequence (a decode row is a tile of one token). The grid is ``(tile, kv_head)``; a program holds
the ``BLOCK_Q x group`` query rows that share one KV head (GQA) as a ``BLOCK_M`` row block, walks
the keys it may see in ``BLOCK_N`` chunks, reading each key's slot through the block table (no
gather), and keeps an fp32 online softmax. Query ``i`` of a sequence with ``q_len`` new tokens and
``ctx`` cached tokens sits at position ``ctx - q_len + i``; it sees keys ``kpos <= qpos`` and, with
a sliding window, ``kpos > qpos - window``.
"""

import torch
import triton
import triton.language as tl

_BLOCK_N = 32  # keys per inner step
_LOG2E = 1.4426950408889634


@triton.jit
def _paged_attention_kernel(
    q_ptr,
    k_cache_ptr,
    v_cache_ptr,
    out_ptr,
    block_tables_ptr,
    tiles_ptr,
    stride_qt,
    stride_qh,
    stride_qd,  # q strides
    stride_ot,
    stride_oh,
    stride_od,  # out strides
    stride_cb,
    stride_cs,
    stride_ch,
    stride_cd,  # cache strides (k and v share them)
    stride_bt,  # block table row stride
    qk_scale,  # scale * log2(e)
    window,  # sliding window (only read when HAS_WINDOW)
    block_size,
    head_dim,
    GROUP: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    D_PAD: tl.constexpr,
    HAS_WINDOW: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    tile = tl.program_id(0)
    kv_head = tl.program_id(1)
    seq = tl.load(tiles_ptr + tile * 4)
    row0 = tl.load(tiles_ptr + tile * 4 + 1)  # global q row of the tile's first token
    n_tok = tl.load(tiles_ptr + tile * 4 + 2)  # valid tokens in this tile
    pos0 = tl.load(tiles_ptr + tile * 4 + 3)  # absolute position of the first token

    r = tl.arange(0, BLOCK_M)
    tok = r // GROUP  # [BLOCK_M] token of each row
    head = kv_head * GROUP + r % GROUP  # [BLOCK_M] query head of each row
    row_ok = tok < n_tok
    d = tl.arange(0, D_PAD)
    d_ok = d < head_dim
    q_row = (row0 + tok).to(tl.int64)[:, None]  # [BLOCK_M, 1]
    q_off = q_row * stride_qt + head[:, None] * stride_qh + d[None, :] * stride_qd
    o_off = q_row * stride_ot + head[:, None] * stride_oh + d[None, :] * stride_od
    io_mask = row_ok[:, None] & d_ok[None, :]
    q = tl.load(q_ptr + q_off, mask=io_mask, other=0.0)
    qpos = pos0 + tok  # [BLOCK_M]

    hi = pos0 + n_tok  # keys [lo, hi) can be seen by some row
    lo = 0
    if HAS_WINDOW:
        lo = tl.maximum(pos0 - window + 1, 0)
    bt_row = block_tables_ptr + seq.to(tl.int64) * stride_bt
    head_off = kv_head * stride_ch

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D_PAD], tl.float32)
    for start in range(lo, hi, BLOCK_N):
        kpos = start + tl.arange(0, BLOCK_N)  # [BLOCK_N]
        k_ok = kpos < hi
        blk = tl.load(bt_row + kpos // block_size, mask=k_ok, other=0).to(tl.int64)
        kv_off = blk * stride_cb + (kpos % block_size) * stride_cs + head_off  # [BLOCK_N]
        kv_off = kv_off[:, None] + d[None, :] * stride_cd  # [BLOCK_N, D_PAD]
        kv_mask = k_ok[:, None] & d_ok[None, :]
        k = tl.load(k_cache_ptr + kv_off, mask=kv_mask, other=0.0).to(q.dtype)
        v = tl.load(v_cache_ptr + kv_off, mask=kv_mask, other=0.0).to(q.dtype)

        s = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * qk_scale  # [BLOCK_M, BLOCK_N]
        see = k_ok[None, :] & (kpos[None, :] <= qpos[:, None])
        if HAS_WINDOW:
            see = see & (kpos[None, :] > qpos[:, None] - window)
        s = tl.where(see, s, float("-inf"))

        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # rows that saw nothing yet
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PRECISION)
        m_i = m_new

    out = acc / tl.where(l_i > 0.0, l_i, 1.0)[:, None]
    tl.store(out_ptr + o_off, out.to(out_ptr.dtype.element_ty), mask=io_mask)


def _as_list(x: list[int] | torch.Tensor) -> list[int]:
    return x.tolist() if isinstance(x, torch.Tensor) else list(x)


def _tiles(cu_seqlens_q: list[int], context_lens: list[int], block_q: int) -> list[int]:
    """Flattened ``[num_tiles, 4]`` rows of (seq, first q row, valid tokens, first position)."""
    tiles: list[int] = []
    for i, ctx in enumerate(context_lens):
        s, q_len = cu_seqlens_q[i], cu_seqlens_q[i + 1] - cu_seqlens_q[i]
        for t in range(0, q_len, block_q):
            tiles += [i, s + t, min(block_q, q_len - t), ctx - q_len + t]
    return tiles


def paged_attention(
    q: torch.Tensor,  # [T, heads, dim], the step's queries, sequences concatenated
    k_cache: torch.Tensor,  # [num_blocks, block_size, kv_heads, dim]
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,  # [B, max_blocks] int32
    cu_seqlens_q: list[int] | torch.Tensor,  # B + 1 offsets into T
    context_lens: list[int] | torch.Tensor,  # [B] cached tokens, this step's included
    scale: float,
    sliding_window: int | None = None,
) -> torch.Tensor:  # [T, heads, dim]
    """Causal attention of each sequence's new queries over its cached keys (prefix + new)."""
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)  # [T, heads, dim]
    heads, dim = q.shape[1], q.shape[2]
    kv_heads = k_cache.shape[2]
    assert heads % kv_heads == 0 and k_cache.stride() == v_cache.stride()
    group = heads // kv_heads
    block_m = max(16, triton.next_power_of_2(group))
    tiles = _tiles(_as_list(cu_seqlens_q), _as_list(context_lens), block_m // group)
    if not tiles or q.shape[0] == 0:
        return out
    tiles_t = torch.tensor(tiles, dtype=torch.int32).to(q.device, non_blocking=True)
    has_window = sliding_window is not None and sliding_window > 0
    _paged_attention_kernel[(len(tiles) // 4, kv_heads)](
        q,
        k_cache,
        v_cache,
        out,
        block_tables,
        tiles_t,
        *q.stride(),
        *out.stride(),
        *k_cache.stride(),
        block_tables.stride(0),
        scale * _LOG2E,
        sliding_window if has_window else 0,
        k_cache.shape[1],
        dim,
        GROUP=group,
        BLOCK_M=block_m,
        BLOCK_N=_BLOCK_N,
        D_PAD=max(16, triton.next_power_of_2(dim)),
        HAS_WINDOW=has_window,
        DOT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
    )
    return out
