"""Triton twin of ``reference.write_kv``: scatter the step's keys/values into the paged cache.

One program per token copies its ``[kv_heads, dim]`` key and value tile into the cache slot
``slot_mapping[t]`` (cache layout ``[num_blocks, block_size, kv_heads, dim]``). A negative slot
(padding, as in vLLM) is skipped.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _write_kv_kernel(
    key_ptr,
    value_ptr,
    k_cache_ptr,
    v_cache_ptr,
    slot_ptr,
    stride_kt,
    stride_kh,
    stride_kd,  # key strides
    stride_vt,
    stride_vh,
    stride_vd,  # value strides
    stride_cb,
    stride_cs,
    stride_ch,
    stride_cd,  # k_cache strides (v_cache shares them)
    block_size,
    kv_heads,
    dim,
    H_PAD: tl.constexpr,
    D_PAD: tl.constexpr,
):
    t = tl.program_id(0)
    slot = tl.load(slot_ptr + t).to(tl.int64)
    if slot >= 0:
        h = tl.arange(0, H_PAD)[:, None]  # [H_PAD, 1]
        d = tl.arange(0, D_PAD)[None, :]  # [1, D_PAD]
        mask = (h < kv_heads) & (d < dim)
        k = tl.load(key_ptr + t * stride_kt + h * stride_kh + d * stride_kd, mask=mask)
        v = tl.load(value_ptr + t * stride_vt + h * stride_vh + d * stride_vd, mask=mask)
        dst = (slot // block_size) * stride_cb + (slot % block_size) * stride_cs
        dst += h * stride_ch + d * stride_cd
        tl.store(k_cache_ptr + dst, k.to(k_cache_ptr.dtype.element_ty), mask=mask)
        tl.store(v_cache_ptr + dst, v.to(v_cache_ptr.dtype.element_ty), mask=mask)


def write_kv(
    key: torch.Tensor,  # [T, kv_heads, dim]
    value: torch.Tensor,  # [T, kv_heads, dim]
    k_cache: torch.Tensor,  # [num_blocks, block_size, kv_heads, dim]
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,  # [T] int64 (or int32)
) -> None:
    """Scatter the step's new keys/values into their cache slots."""
    num_tokens, kv_heads, dim = key.shape
    if num_tokens == 0:
        return
    assert k_cache.shape == v_cache.shape and k_cache.stride() == v_cache.stride()
    _write_kv_kernel[(num_tokens,)](
        key,
        value,
        k_cache,
        v_cache,
        slot_mapping,
        *key.stride(),
        *value.stride(),
        *k_cache.stride(),
        k_cache.shape[1],
        kv_heads,
        dim,
        H_PAD=triton.next_power_of_2(kv_heads),
        D_PAD=triton.next_power_of_2(dim),
    )
