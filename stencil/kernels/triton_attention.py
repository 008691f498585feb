"""Triton twin of ``reference.paged_attention``: varlen causal attention over the paged KV cache.

Work is split into tiles on the host: a tile is up to ``BLOCK_Q`` consecutive query tokens of one
sequence (a decode row is a tile of one token). The grid is ``(tile, kv_head, split)``; a program
holds the ``BLOCK_Q x group`` query rows that share one KV head (GQA) as a ``BLOCK_M`` row block,
walks the keys it may see in ``BLOCK_N`` chunks, reading each key's slot through the block table
(no gather), and keeps an fp32 online softmax (base 2). Query ``i`` of a sequence with ``q_len``
new tokens and ``ctx`` cached tokens sits at position ``ctx - q_len + i``; it sees keys
``kpos <= qpos`` and, with a sliding window, ``kpos > qpos - window``.

When there are too few programs to fill the GPU (small decode batches), the key range is split
(flash-decoding): each split writes a normalised partial output and its log-sum-exp to fp32
scratch, and a second kernel merges the splits.
"""

import torch
import triton
import triton.language as tl

_BLOCK_N = 32  # keys per inner step
_LOG2E = 1.4426950408889634
_BLOCK_M_DECODE = 16  # query rows (tokens x heads of a group) per program, short rows
_BLOCK_M_PREFILL = 64  # ... long rows (prefill chunks)
_MAX_SPLITS = 16
_MIN_KEYS_PER_SPLIT = 256


@triton.jit
def _attend_keys(
    q,  # [BLOCK_M, D_PAD]
    qpos,  # [BLOCK_M] absolute query positions
    k_cache_ptr,
    v_cache_ptr,
    bt_row,
    head_off,
    d,
    d_ok,
    start,
    stop,
    window,
    qk_scale,
    stride_cb,
    stride_cs,
    stride_cd,
    BLOCK_SIZE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    D_PAD: tl.constexpr,
    HAS_WINDOW: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    """Online softmax of the rows over keys ``[start, stop)``: (acc, row sum, row max), base 2."""
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.full([BLOCK_M], 0.0, tl.float32)
    acc = tl.full([BLOCK_M, D_PAD], 0.0, tl.float32)
    for kstart in range(start, stop, BLOCK_N):
        kpos = kstart + tl.arange(0, BLOCK_N)  # [BLOCK_N]
        k_ok = kpos < stop
        blk = tl.load(bt_row + kpos // BLOCK_SIZE, mask=k_ok, other=0).to(tl.int64)
        kv_off = blk * stride_cb + (kpos % BLOCK_SIZE) * stride_cs + head_off  # [BLOCK_N]
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
    return acc, l_i, m_i


@triton.jit
def _paged_attention_kernel(
    q_ptr,
    k_cache_ptr,
    v_cache_ptr,
    out_ptr,
    block_tables_ptr,
    tiles_ptr,
    part_out_ptr,  # [splits, T, heads, D_PAD] fp32, only with SPLIT
    part_lse_ptr,  # [splits, T, heads] fp32, only with SPLIT
    sinks_ptr,  # [heads] fp32, only with HAS_SINKS
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
    head_dim,
    num_tokens,
    num_heads,
    num_splits,
    BLOCK_SIZE: tl.constexpr,  # cache block (page) size: a constant, so // and % are cheap
    GROUP: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    D_PAD: tl.constexpr,
    HAS_WINDOW: tl.constexpr,
    SPLIT: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    HAS_SINKS: tl.constexpr,
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
    d = tl.arange(0, D_PAD)
    d_ok = d < head_dim
    q_row = (row0 + tok).to(tl.int64)  # [BLOCK_M]
    io_mask = (tok < n_tok)[:, None] & d_ok[None, :]
    q_off = q_row[:, None] * stride_qt + head[:, None] * stride_qh + d[None, :] * stride_qd
    q = tl.load(q_ptr + q_off, mask=io_mask, other=0.0)  # [BLOCK_M, D_PAD]

    start = 0  # keys [start, stop) are seen by some row of the tile
    stop = pos0 + n_tok
    if HAS_WINDOW:
        start = tl.maximum(pos0 - window + 1, 0)
    if SPLIT:
        chunk = tl.cdiv(tl.cdiv(stop - start, num_splits), BLOCK_N) * BLOCK_N
        start = start + tl.program_id(2) * chunk
        stop = tl.minimum(stop, start + chunk)
    bt_row = block_tables_ptr + seq.to(tl.int64) * stride_bt
    acc, l_i, m_i = _attend_keys(
        q,
        pos0 + tok,
        k_cache_ptr,
        v_cache_ptr,
        bt_row,
        kv_head * stride_ch,
        d,
        d_ok,
        start,
        stop,
        window,
        qk_scale,
        stride_cb,
        stride_cs,
        stride_cd,
        BLOCK_SIZE,
        BLOCK_M,
        BLOCK_N,
        D_PAD,
        HAS_WINDOW,
        DOT_PRECISION,
    )
    if HAS_SINKS and not SPLIT:  # the sink joins the denominator (base 2, like m_i)
        sink = tl.load(sinks_ptr + head) * 1.4426950408889634  # [BLOCK_M]
        m_new = tl.maximum(m_i, sink)
        corr = tl.where(m_i > float("-inf"), tl.exp2(m_i - m_new), 0.0)
        acc = acc * corr[:, None]
        l_i = l_i * corr + tl.exp2(sink - m_new)
    out = acc / tl.where(l_i > 0.0, l_i, 1.0)[:, None]  # [BLOCK_M, D_PAD]
    if SPLIT:
        part = (tl.program_id(2) * num_tokens + q_row) * num_heads + head  # [BLOCK_M]
        lse = tl.where(l_i > 0.0, m_i + tl.log2(tl.where(l_i > 0.0, l_i, 1.0)), float("-inf"))
        tl.store(part_lse_ptr + part, lse, mask=tok < n_tok)
        row_ok = (tok < n_tok)[:, None]  # padded columns too: they are 0, the merge reads them
        tl.store(part_out_ptr + part[:, None] * D_PAD + d[None, :], out, mask=row_ok)
    else:
        o_off = q_row[:, None] * stride_ot + head[:, None] * stride_oh + d[None, :] * stride_od
        tl.store(out_ptr + o_off, out.to(out_ptr.dtype.element_ty), mask=io_mask)


@triton.jit
def _merge_splits_kernel(
    out_ptr,
    part_out_ptr,
    part_lse_ptr,
    rows_ptr,
    sinks_ptr,
    stride_ot,
    stride_oh,
    stride_od,
    head_dim,
    num_tokens,
    num_heads,
    num_splits,
    S_PAD: tl.constexpr,
    D_PAD: tl.constexpr,
    HAS_SINKS: tl.constexpr,
):
    """One program per (launch row, head): weight each split's output by its share of the sum."""
    t = tl.load(rows_ptr + tl.program_id(0)).to(tl.int64)
    h = tl.program_id(1)
    s = tl.arange(0, S_PAD)
    d = tl.arange(0, D_PAD)
    s_ok = s < num_splits
    part = (s * num_tokens + t) * num_heads + h  # [S_PAD]
    lse = tl.load(part_lse_ptr + part, mask=s_ok, other=float("-inf"))
    lse_max = tl.max(lse, axis=0)
    denom = 0.0
    if HAS_SINKS:  # the sink joins the denominator (base 2)
        sink = tl.load(sinks_ptr + h) * 1.4426950408889634
        lse_max = tl.maximum(lse_max, sink)
        denom = tl.exp2(sink - lse_max)
    w = tl.where(s_ok & (lse > float("-inf")), tl.exp2(lse - lse_max), 0.0)  # [S_PAD]
    o = tl.load(part_out_ptr + part[:, None] * D_PAD + d[None, :], mask=s_ok[:, None], other=0.0)
    merged = tl.sum(w[:, None] * o, axis=0) / (tl.sum(w, axis=0) + denom)  # [D_PAD]
    o_ptr = out_ptr + t * stride_ot + h * stride_oh + d * stride_od
    tl.store(o_ptr, merged.to(out_ptr.dtype.element_ty), mask=d < head_dim)


def _as_list(x: list[int] | torch.Tensor) -> list[int]:
    return x.tolist() if isinstance(x, torch.Tensor) else list(x)


def _tiles(
    cu_seqlens_q: list[int], context_lens: list[int], seqs: list[int], block_q: int
) -> list[int]:
    """Flattened ``[num_tiles, 4]`` rows of (seq, first q row, valid tokens, first position)."""
    tiles: list[int] = []
    for i in seqs:
        s, q_len = cu_seqlens_q[i], cu_seqlens_q[i + 1] - cu_seqlens_q[i]
        for t in range(0, q_len, block_q):
            tiles += [i, s + t, min(block_q, q_len - t), context_lens[i] - q_len + t]
    return tiles


def _tile_rows(tiles: list[int]) -> list[int]:
    """The q rows that ``tiles`` cover."""
    rows: list[int] = []
    for t in range(0, len(tiles), 4):
        rows += range(tiles[t + 1], tiles[t + 1] + tiles[t + 2])
    return rows


def _num_splits(programs: int, max_keys: int, device: torch.device) -> int:
    """Key-range splits so that small decode batches still fill the GPU's SMs."""
    if device.type != "cuda":
        return 1
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    if programs >= sms:
        return 1
    by_keys = triton.cdiv(max_keys, _MIN_KEYS_PER_SPLIT)
    return max(1, min(triton.cdiv(2 * sms, programs), by_keys, _MAX_SPLITS))


def paged_attention(
    q: torch.Tensor,  # [T, heads, dim], the step's queries, sequences concatenated
    k_cache: torch.Tensor,  # [num_blocks, block_size, kv_heads, dim]
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,  # [B, max_blocks] int32
    cu_seqlens_q: list[int] | torch.Tensor,  # B + 1 offsets into T
    context_lens: list[int] | torch.Tensor,  # [B] cached tokens, this step's included
    scale: float,
    sliding_window: int | None = None,
    plan: dict | None = None,
    sinks: torch.Tensor | None = None,  # [heads]: GPT-OSS's attention sinks
    softcap: float | None = None,
) -> torch.Tensor:  # [T, heads, dim]
    """Causal attention of each sequence's new queries over its cached keys (prefix + new).
    ``plan`` (the reference's per-step scratch) is not needed here; soft-capped scores (Gemma 2)
    go to the reference."""
    if softcap is not None:
        from stencil.kernels import reference

        return reference.paged_attention(
            q,
            k_cache,
            v_cache,
            block_tables,
            list(cu_seqlens_q),
            list(context_lens),
            scale,
            sliding_window,
            plan,
            sinks,
            softcap,
        )
    return paged_attention_splits(
        q,
        k_cache,
        v_cache,
        block_tables,
        cu_seqlens_q,
        context_lens,
        scale,
        sliding_window,
        sinks=sinks,
    )


def paged_attention_splits(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    cu_seqlens_q: list[int] | torch.Tensor,
    context_lens: list[int] | torch.Tensor,
    scale: float,
    sliding_window: int | None = None,
    num_splits: int | None = None,
    sinks: torch.Tensor | None = None,
) -> torch.Tensor:  # [T, heads, dim]
    """``paged_attention`` with the key-range split count forced (None = heuristic).

    Sequences with few new tokens (decode) and long ones (prefill chunks) go to two launches
    with ``BLOCK_M`` 16 and 64 query rows, so prefill tiles re-read the keys less often.
    """
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)  # [T, heads, dim]
    heads, kv_heads = q.shape[1], k_cache.shape[2]
    assert heads % kv_heads == 0 and k_cache.stride() == v_cache.stride()
    group = heads // kv_heads
    cu, ctx = _as_list(cu_seqlens_q), _as_list(context_lens)
    small_m = max(_BLOCK_M_DECODE, triton.next_power_of_2(group))
    big_m = max(_BLOCK_M_PREFILL, small_m)
    short = [i for i in range(len(ctx)) if cu[i + 1] - cu[i] <= small_m // group]
    long = [i for i in range(len(ctx)) if cu[i + 1] - cu[i] > small_m // group]
    window = sliding_window if sliding_window is not None and sliding_window > 0 else 0
    for seqs, block_m in ((short, small_m), (long, big_m)):
        tiles = _tiles(cu, ctx, seqs, block_m // group)
        if tiles:
            max_keys = max(ctx[i] for i in seqs)
            max_keys = min(max_keys, window + block_m) if window else max_keys
            splits = num_splits or _num_splits(len(tiles) // 4 * kv_heads, max_keys, q.device)
            _launch(
                q,
                k_cache,
                v_cache,
                block_tables,
                out,
                tiles,
                block_m,
                scale,
                window,
                splits,
                sinks,
            )
    return out


def _launch(
    q: torch.Tensor,  # [T, heads, dim]
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    out: torch.Tensor,  # [T, heads, dim], the rows of ``tiles`` are written
    tiles: list[int],
    block_m: int,
    scale: float,
    window: int,  # 0 = none
    num_splits: int,
    sinks: torch.Tensor | None = None,  # [heads]
) -> None:
    """One attention launch over ``tiles`` (+ the split merge when ``num_splits > 1``)."""
    (num_tokens, heads, dim), kv_heads = q.shape, k_cache.shape[2]
    d_pad = max(16, triton.next_power_of_2(dim))
    part_out = part_lse = out  # placeholders, unused without splits
    if num_splits > 1:
        f32 = {"dtype": torch.float32, "device": q.device}
        part_out = torch.empty((num_splits, num_tokens, heads, d_pad), **f32)
        part_lse = torch.empty((num_splits, num_tokens, heads), **f32)
    tiles_t = torch.tensor(tiles, dtype=torch.int32).to(q.device, non_blocking=True)
    sinks_t = out if sinks is None else sinks.to(torch.float32).contiguous()
    _paged_attention_kernel[(len(tiles) // 4, kv_heads, num_splits)](
        q,
        k_cache,
        v_cache,
        out,
        block_tables,
        tiles_t,
        part_out,
        part_lse,
        sinks_t,
        *q.stride(),
        *out.stride(),
        *k_cache.stride(),
        block_tables.stride(0),
        scale * _LOG2E,
        window,
        dim,
        num_tokens,
        heads,
        num_splits,
        BLOCK_SIZE=k_cache.shape[1],
        GROUP=heads // kv_heads,
        BLOCK_M=block_m,
        BLOCK_N=_BLOCK_N,
        D_PAD=d_pad,
        HAS_WINDOW=window > 0,
        SPLIT=num_splits > 1,
        DOT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
        HAS_SINKS=sinks is not None,
    )
    if num_splits > 1:
        rows = _tile_rows(tiles)
        rows_t = torch.tensor(rows, dtype=torch.int32).to(q.device, non_blocking=True)
        _merge_splits_kernel[(len(rows), heads)](
            out,
            part_out,
            part_lse,
            rows_t,
            sinks_t,
            *out.stride(),
            dim,
            num_tokens,
            heads,
            num_splits,
            S_PAD=triton.next_power_of_2(num_splits),
            D_PAD=d_pad,
            HAS_SINKS=sinks is not None,
        )
