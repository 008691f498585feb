"""The C layer ops (RMSNorm, fused add + RMSNorm, rotary, SiLU-and-mul, KV write) against their
torch twins in ``reference``, and the twins against transformers' Llama modules."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig
from transformers.models.llama import modeling_llama as hf

from stencil.kernels import get_kernels, reference
from stencil.kernels.cpu_layer_ops import CpuLayerOps, load

DTYPES = [torch.float32, torch.bfloat16]
ROWS = [1, 64, 300]  # 300 x 576 crosses the OpenMP threshold
HIDDEN, HEADS, KV_HEADS, DIM = 576, 9, 3, 64


@pytest.fixture(scope="module")
def ops() -> CpuLayerOps:
    k = load()
    assert k is not None, "the C library did not build (is a C compiler installed?)"
    return k


def _close(got: torch.Tensor, want: torch.Tensor) -> None:
    """fp32: up to summation order and FMA contraction; bf16: the C ops round where torch rounds,
    so at most one bf16 step apart (an exp approximation can flip a rounding)."""
    assert got.dtype == want.dtype
    if got.dtype == torch.float32:
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    else:
        torch.testing.assert_close(got.float(), want.float(), atol=1e-6, rtol=2**-7)
        assert (got != want).float().mean() < 1e-3


def _randn(*shape: int, dtype: torch.dtype, seed: int, scale: float = 1.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * scale).to(dtype)


def _cos_sin(max_pos: int = 4096, dim: int = DIM, factor: float = 1.0) -> torch.Tensor:
    inv = 1.0 / (10000.0 ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)).float()
    freqs = torch.outer(torch.arange(max_pos, dtype=torch.float32), inv)
    return torch.cat((freqs.cos(), freqs.sin()), -1) * factor


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", ROWS)
def test_rms_norm(ops, dtype, rows) -> None:
    x = _randn(rows, HIDDEN, dtype=dtype, seed=rows, scale=3.0)
    w = _randn(HIDDEN, dtype=dtype, seed=1) + 1
    got, want = torch.empty_like(x), torch.empty_like(x)
    ops.rms_norm(got, x, w, 1e-5)
    reference.rms_norm(want, x, w, 1e-5)
    _close(got, want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", ROWS)
def test_fused_add_rms_norm(ops, dtype, rows) -> None:
    x = _randn(rows, HIDDEN, dtype=dtype, seed=rows)
    res = _randn(rows, HIDDEN, dtype=dtype, seed=rows + 1, scale=4.0)
    w = _randn(HIDDEN, dtype=dtype, seed=2) + 1
    x2, res2 = x.clone(), res.clone()
    ops.fused_add_rms_norm(x, res, w, 1e-6)
    reference.fused_add_rms_norm(x2, res2, w, 1e-6)
    assert torch.equal(res, res2)  # one rounded add, the same in both
    _close(x, x2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rms_norm_per_head_in_place_on_a_strided_view(ops, dtype) -> None:
    """Qwen3's q/k norm: [T, heads, dim] views into the qkv projection, normalised in place."""
    qkv = _randn(5, (HEADS + 2 * KV_HEADS) * DIM, dtype=dtype, seed=3)
    want = qkv.clone()
    w = _randn(DIM, dtype=dtype, seed=4) + 1
    for t in (qkv, want):
        q = t[:, : HEADS * DIM].view(5, HEADS, DIM)
        norm = ops.rms_norm if t is qkv else reference.rms_norm
        norm(q, q, w, 1e-6)
    _close(qkv, want)
    assert torch.equal(qkv[:, HEADS * DIM :], want[:, HEADS * DIM :])  # k and v untouched


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", ROWS)
def test_rotary_embedding_on_qkv_views(ops, dtype, rows) -> None:
    qkv = _randn(rows, (HEADS + 2 * KV_HEADS) * DIM, dtype=dtype, seed=rows)
    want = qkv.clone()
    positions = torch.randint(0, 4096, (rows,), generator=torch.Generator().manual_seed(rows))
    cos_sin = _cos_sin(factor=1.3)
    for t, rope in ((qkv, ops.rotary_embedding), (want, reference.rotary_embedding)):
        q, k, _ = t.split([HEADS * DIM, KV_HEADS * DIM, KV_HEADS * DIM], -1)
        rope(positions, q.view(rows, HEADS, DIM), k.view(rows, KV_HEADS, DIM), cos_sin)
    _close(qkv, want)
    assert torch.equal(qkv[:, -KV_HEADS * DIM :], want[:, -KV_HEADS * DIM :])


def test_rotary_embedding_refuses_positions_beyond_the_table(ops) -> None:
    q, k = torch.zeros(2, HEADS, DIM), torch.zeros(2, KV_HEADS, DIM)
    with pytest.raises(IndexError, match="positions"):
        ops.rotary_embedding(torch.tensor([0, 4096]), q, k, _cos_sin())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", ROWS)
def test_silu_and_mul(ops, dtype, rows) -> None:
    gate_up = _randn(rows, 2 * 1536, dtype=dtype, seed=rows, scale=6.0)
    gate_up[0, :4] = torch.tensor([-200.0, 200.0, 0.0, -90.0])  # the exp clamp's edges
    got, want = (torch.empty(rows, 1536, dtype=dtype) for _ in range(2))
    ops.silu_and_mul(got, gate_up)
    reference.silu_and_mul(want, gate_up)
    _close(got, want)


def _head_major_cache(blocks: int, bs: int, dtype) -> torch.Tensor:
    """The model runner's CPU layout: [kv_heads, blocks, bs, dim] storage, logical block-major."""
    return torch.zeros(KV_HEADS, blocks, bs, DIM, dtype=dtype).permute(1, 2, 0, 3)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", ROWS)
def test_write_kv_into_the_head_major_cache(ops, dtype, rows) -> None:
    qkv = _randn(rows, (HEADS + 2 * KV_HEADS) * DIM, dtype=dtype, seed=rows)
    _, k, v = qkv.split([HEADS * DIM, KV_HEADS * DIM, KV_HEADS * DIM], -1)
    k, v = k.view(rows, KV_HEADS, DIM), v.view(rows, KV_HEADS, DIM)
    slots = torch.randperm(64 * 16, generator=torch.Generator().manual_seed(rows))[:rows]
    got = [_head_major_cache(64, 16, dtype) for _ in range(2)]
    want = [_head_major_cache(64, 16, dtype) for _ in range(2)]
    ops.write_kv(k, v, *got, slots)
    reference.write_kv(k, v, *want, slots)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_write_kv_refuses_slots_beyond_the_cache(ops) -> None:
    k = torch.ones(2, KV_HEADS, DIM)
    caches = [_head_major_cache(4, 16, torch.float32) for _ in range(2)]
    with pytest.raises(IndexError, match="slots"):
        ops.write_kv(k, k, *caches, torch.tensor([3, 64]))


def test_other_dtypes_and_mixed_dtypes_take_the_twin(ops) -> None:
    """float16, and a float32 key into a bfloat16 cache: the reference computes them."""
    x = _randn(4, HIDDEN, dtype=torch.float16, seed=5)
    w = torch.ones(HIDDEN, dtype=torch.float16)
    got, want = torch.empty_like(x), torch.empty_like(x)
    ops.rms_norm(got, x, w, 1e-6)
    reference.rms_norm(want, x, w, 1e-6)
    assert torch.equal(got, want)
    k = _randn(2, KV_HEADS, DIM, dtype=torch.float32, seed=6)
    caches = [_head_major_cache(4, 16, torch.bfloat16) for _ in range(2)]
    ops.write_kv(k, k, *caches, torch.tensor([5, 17]))
    assert torch.equal(caches[0][0, 5], k[0].to(torch.bfloat16))
    assert torch.equal(caches[1][1, 1], k[1].to(torch.bfloat16))


def test_twins_match_transformers_llama_modules() -> None:
    """The oracle of the oracle: HF's LlamaRMSNorm and rotary (rotate_half) on the same input."""
    torch.manual_seed(0)
    x = torch.randn(7, HIDDEN)
    norm = hf.LlamaRMSNorm(HIDDEN, eps=1e-5)
    norm.weight.data = torch.rand(HIDDEN) + 0.5
    out = torch.empty_like(x)
    reference.rms_norm(out, x, norm.weight.data, 1e-5)
    torch.testing.assert_close(out, norm(x), atol=0, rtol=0)
    config = LlamaConfig(hidden_size=HEADS * DIM, num_attention_heads=HEADS, rope_theta=10000.0)
    positions = torch.tensor([0, 1, 5, 100, 2047, 3, 9])
    q, k = torch.randn(7, HEADS, DIM), torch.randn(7, KV_HEADS, DIM)
    cos, sin = hf.LlamaRotaryEmbedding(config)(q, positions.unsqueeze(0))  # [1, T, dim]
    hq, hk = hf.apply_rotary_pos_emb(
        q.transpose(0, 1)[None], k.transpose(0, 1)[None], cos, sin
    )  # [1, heads, T, dim]
    reference.rotary_embedding(positions, q, k, _cos_sin())
    torch.testing.assert_close(q, hq[0].transpose(0, 1), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(k, hk[0].transpose(0, 1), atol=1e-6, rtol=1e-5)


def test_every_kernel_set_has_the_layer_ops(ops) -> None:
    cpu, torch_set = get_kernels("cpu"), get_kernels("cpu", "torch")
    assert isinstance(cpu.rms_norm.__self__, CpuLayerOps)
    assert isinstance(cpu.write_kv.__self__, CpuLayerOps)
    assert torch_set.silu_and_mul is reference.silu_and_mul
    assert torch_set.rotary_embedding is reference.rotary_embedding
