"""Pure-torch kernels: the CPU path of the engine and the oracles of the Triton twins.

Cache layout (vLLM's): ``k_cache``/``v_cache`` are ``[num_blocks, block_size, num_kv_heads, head_dim]``;
token ``t`` of a sequence lives in slot ``block_table[t // block_size] * block_size + t % block_size``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from stencil.kernels.quant_weight import is_quantized


def linear(x: torch.Tensor, weight, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``x @ weight.T + bias`` (``F.linear``: MKL on CPU, cuBLAS on CUDA); a quantized weight
    (``QuantizedWeight`` / ``SplitWeight``) goes to ``quant_linear``."""
    if is_quantized(weight):
        return quant_linear(x, weight, bias)
    return F.linear(x, weight, bias)


def grouped_linear(
    x: torch.Tensor,  # [M, K] rows grouped by expert; [T, K] with ``rows``
    weights: list,
    counts: list[int],  # rows of each expert, sum M
    biases: list[torch.Tensor | None] | None = None,
    linear=linear,
    rows: torch.Tensor | None = None,  # [M] the x row of each grouped row (the gather)
    combine: tuple | None = None,  # (tokens [M], scale [M], T): each row's token and weight
) -> torch.Tensor:  # [M, N]; [T, N] with ``combine``
    """Mixture-of-experts: expert e's ``counts[e]`` rows through ``linear`` with its weight (and
    bias); experts without rows are skipped. ``combine`` adds each row, times its weight, into
    its token's output row, in row order."""
    if rows is not None:
        x = x[rows]
    outs, start = [], 0
    for e, n in enumerate(counts):
        if n:
            outs.append(
                linear(x[start : start + n], weights[e], None if biases is None else biases[e])
            )
            start += n
    h = torch.cat(outs) if outs else x.new_empty(0, weights[0].shape[0])
    return h if combine is None else combine_rows(h, combine)


def combine_rows(h: torch.Tensor, combine: tuple) -> torch.Tensor:
    """``h [M, N]`` rows grouped by expert -> ``[T, N]``: each row times its weight, added into
    its token's row in row order (``combine``: tokens [M], scale [M, 1], T)."""
    tokens, scale, num_tokens = combine
    out = h.new_zeros(num_tokens, h.shape[1])
    return out.index_add_(0, tokens, h * scale.reshape(-1, 1).to(h.dtype))


def quant_linear(x: torch.Tensor, weight, bias: torch.Tensor | None = None) -> torch.Tensor:
    """The twin of the quantized kernels: dequantize the whole weight, then ``F.linear``."""
    w = weight.dequantize(torch.float32)  # [N, K]
    return F.linear(x.float(), w, None if bias is None else bias.float()).to(x.dtype)


def int8_rows(x: torch.Tensor, block: int = 32) -> torch.Tensor:
    """``x`` (fp32) as the int8-activation kernel sees it: per block of ``block`` values along the
    last dim, ``d = max|x| / 127``, ``round_half_even(x * (1 / d)) * d`` (fp32 throughout)."""
    xb = x.float().reshape(*x.shape[:-1], x.shape[-1] // block, block)
    d = xb.abs().amax(-1, keepdim=True) / 127
    inv = torch.where(d > 0, 1 / d, torch.zeros_like(d))
    return (torch.round(xb * inv) * d).reshape(x.shape)


def write_kv(
    key: torch.Tensor,  # [T, kv_heads, dim]
    value: torch.Tensor,  # [T, kv_heads, dim]
    k_cache: torch.Tensor,  # [num_blocks, block_size, kv_heads, dim]
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,  # [T] int64
) -> None:
    """Scatter the step's new keys/values into their cache slots (any cache strides)."""
    bs = k_cache.shape[1]
    block, offset = slot_mapping // bs, slot_mapping % bs
    k_cache[block, offset] = key.to(k_cache.dtype)
    v_cache[block, offset] = value.to(v_cache.dtype)


def rms_norm(out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, eps: float) -> None:
    """``out = weight * x / sqrt(mean(x**2) + eps)`` over the last dim (``out`` may be ``x``):
    in float32, the normalised ``x`` rounded to its dtype before the weight (HF's LlamaRMSNorm)."""
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    out.copy_(weight * y.to(x.dtype))


def fused_add_rms_norm(
    x: torch.Tensor,  # [T, hidden]
    residual: torch.Tensor,  # [T, hidden]
    weight: torch.Tensor,
    eps: float,
) -> None:
    """In place: ``residual += x``, then ``x = rms_norm(residual) * weight``."""
    residual.add_(x)
    rms_norm(x, residual, weight, eps)


def rotary_embedding(
    positions: torch.Tensor,  # [T] int64
    q: torch.Tensor,  # [T, heads, dim]
    k: torch.Tensor,  # [T, kv_heads, dim]
    cos_sin: torch.Tensor,  # [max_positions, dim] float32: [cos | sin] of the dim / 2 frequencies
) -> None:
    """Neox-style rotary embedding in place (HF's ``rotate_half``): each half-split pair
    ``(x1, x2)`` becomes ``(x1 cos - x2 sin, x2 cos + x1 sin)``, in the dtype of ``q``."""
    half = cos_sin.shape[1] // 2
    cs = cos_sin[positions].unsqueeze(1)  # [T, 1, dim]
    cos = cs[..., :half].repeat(1, 1, 2).to(q.dtype)
    sin = cs[..., half:].repeat(1, 1, 2).to(q.dtype)
    for x in (q, k):
        x.copy_(x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin)


def silu_and_mul(out: torch.Tensor, gate_up: torch.Tensor) -> None:
    """``out [T, d] = silu(gate_up[:, :d]) * gate_up[:, d:]``."""
    d = gate_up.shape[-1] // 2
    torch.mul(F.silu(gate_up[..., :d]), gate_up[..., d:], out=out)


def paged_attention(
    q: torch.Tensor,  # [T, heads, dim], the step's queries, sequences concatenated
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,  # [B, max_blocks] int32
    cu_seqlens_q: list[int],  # B + 1 offsets into T
    context_lens: list[int],  # [B] tokens in cache per sequence, this step's included
    scale: float,
    sliding_window: int | None = None,
    plan: dict | None = None,
    sinks: torch.Tensor | None = None,  # [heads] float: GPT-OSS's attention sinks
    softcap: float | None = None,
) -> torch.Tensor:  # [T, heads, dim]
    """Causal attention of each sequence's new queries over its cached keys (prefix + new).
    ``softcap`` (Gemma 2): scores become ``softcap * tanh(scores / softcap)`` before the mask.

    Query ``i`` of a sequence with ``q_len`` new tokens sits at position ``ctx - q_len + i``.
    Decode rows are sorted by context length and batched in groups (little padding); each prefill
    chunk is its own group. ``plan``: a dict shared by every layer of one step, where the groups,
    index tensors and masks are built once (the Triton twin ignores it). ``sinks``: one logit per
    head that joins each row's softmax denominator and contributes no value (GPT-OSS).
    """
    plan = {} if plan is None else plan
    kv_heads = k_cache.shape[2]
    group = q.shape[1] // kv_heads
    key = ("groups", sliding_window, group, q.device)
    if key not in plan:
        plan[key] = _plan(block_tables, cu_seqlens_q, context_lens, sliding_window, group, q.device)
    out = torch.empty_like(q)
    for rows, tables, n, mask in plan[key]:
        b = tables.shape[0]
        qg = q[rows].view(b, n, kv_heads, group, q.shape[2]).permute(0, 2, 3, 1, 4)
        qg = qg.reshape(b, kv_heads, group * n, q.shape[2])  # [B, kv_heads, group * n, dim]
        k = gather_kv(k_cache, tables, mask.shape[-1]).to(q.dtype)  # [B, kv_heads, L, dim]
        v = gather_kv(v_cache, tables, mask.shape[-1]).to(q.dtype)
        scores = torch.matmul(qg, k.transpose(-1, -2)) * scale  # [B, kv_heads, group * n, L]
        if softcap is not None:
            scores = torch.tanh(scores / softcap) * softcap
        scores.masked_fill_(~mask, float("-inf"))
        if sinks is None:
            probs = scores.softmax(-1)
        else:  # rows are (head in group, position): each row's head's sink as one more key
            sink = sinks.float().view(kv_heads, group, 1).expand(kv_heads, group, n)
            sink = sink.reshape(1, kv_heads, group * n, 1).expand(b, -1, -1, -1).to(scores.dtype)
            probs = torch.cat((scores, sink), dim=-1).softmax(-1)[..., :-1]
        o = torch.matmul(probs, v)  # [B, kv_heads, group * n, dim]
        o = o.view(b, kv_heads, group, n, q.shape[2]).permute(0, 3, 1, 2, 4)
        out[rows] = o.reshape(b * n, q.shape[1], q.shape[2])
    return out


_DECODE_GROUP = 16


def _plan(block_tables, cu_seqlens_q, context_lens, sliding_window, group, device) -> list[tuple]:
    """(query rows, block tables, queries per sequence, mask [B, 1, group * n | 1, L]) per group."""
    b = len(context_lens)
    q_lens = [cu_seqlens_q[i + 1] - cu_seqlens_q[i] for i in range(b)]
    decode = sorted((i for i in range(b) if q_lens[i] == 1), key=lambda i: context_lens[i])
    groups = [decode[j : j + _DECODE_GROUP] for j in range(0, len(decode), _DECODE_GROUP)]
    groups += [[i] for i in range(b) if q_lens[i] > 1]
    plan = []
    for seqs in groups:
        n = q_lens[seqs[0]]
        ctx = torch.tensor([context_lens[i] for i in seqs], device=device)
        rows = torch.tensor([cu_seqlens_q[i] + j for i in seqs for j in range(n)], device=device)
        length = int(ctx.max())
        kpos = torch.arange(length, device=device)
        qpos = (ctx.view(-1, 1) - n + torch.arange(n, device=device)).view(-1, n, 1)  # [B, n, 1]
        mask = (kpos <= qpos) & (kpos < ctx.view(-1, 1, 1))  # [B, n, L]
        if sliding_window is not None:
            mask &= kpos > qpos - sliding_window
        if n > 1:  # query rows are (head in group, position): repeat the positions' mask
            mask = mask.repeat(1, group, 1)
        plan.append((rows, block_tables[seqs], n, mask.unsqueeze(1)))
    return plan


def gather_kv(cache: torch.Tensor, tables: torch.Tensor, length: int) -> torch.Tensor:
    """[num_blocks, block_size, kv_heads, dim] -> [B, kv_heads, length, dim], one copy.

    Fastest when the cache is a view of head-major storage ``[kv_heads, num_blocks, block_size,
    dim]`` (what the CPU model runner allocates): each gathered ``[length, dim]`` matrix is then
    contiguous, ready for a BLAS matmul."""
    nb, bs, kv_heads, dim = cache.shape
    b, need = tables.shape[0], -(-length // bs)
    flat = tables[:, :need].reshape(-1).long().clamp(min=0)  # padding entries (-1) are masked
    heads_major = cache.permute(2, 0, 1, 3)  # [kv_heads, num_blocks, block_size, dim]
    if heads_major.is_contiguous():
        g = heads_major.index_select(1, flat).view(kv_heads, b, need * bs, dim)
        return g[:, :, :length].transpose(0, 1)
    g = cache.index_select(0, flat).view(b, need * bs, kv_heads, dim)[:, :length]
    return g.permute(0, 2, 1, 3).contiguous()


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
    pad = torch.zeros(
        bitmask.shape[0], vocab - flat.shape[1], dtype=torch.bool, device=bitmask.device
    )
    return torch.cat([flat, pad], dim=1)
