"""The C GEMM over panel-packed weights against an fp64 oracle, fp32 and bf16."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from stencil.kernels import panel_linear
from stencil.kernels.panel_linear import PanelWeight

KERNEL = panel_linear.load()
pytestmark = pytest.mark.skipif(KERNEL is None, reason="no C compiler or no AVX-512F")
DTYPES = [
    pytest.param(
        dtype,
        marks=pytest.mark.skipif(
            KERNEL is not None and dtype not in KERNEL.dtypes, reason=f"CPU cannot run {dtype}"
        ),
    )
    for dtype in panel_linear.DTYPES
]


@pytest.mark.parametrize("dtype", panel_linear.DTYPES)
@pytest.mark.parametrize("n", [16, 32, 48, 80, 960])
def test_pack_round_trips(n: int, dtype: torch.dtype) -> None:
    w = torch.randn(n, 24).to(dtype)
    packed = PanelWeight.pack(w)
    assert packed.shape == (n, 24) and packed.dtype == dtype
    assert packed.nbytes == w.numel() * w.element_size()
    assert torch.equal(packed.dense(), w)
    if n >= 48:  # panel 0 holds channels 0..47, k-major (bf16: k pairs)
        first = w[:48, 0] if dtype == torch.float32 else w[:48, :2].reshape(-1)
        assert torch.equal(packed.data[: len(first)], first)


def bf16_tolerance(x: torch.Tensor, w: torch.Tensor) -> float:
    """Products of bf16 are exact in fp32; the result rounds once to bf16 (2^-8 relative)."""
    return float((x.double().abs() @ w.double().abs().T).max()) * 2**-8 + 1e-6


# rows: every tile height 1-8 and several tiles; n: full panels, a 16- or 32-wide last one;
# k: one chunk, several chunks (fp32: 1024 each), odd sizes (fp32)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", [0, 1, 3, 8, 9, 17, 64, 130])
@pytest.mark.parametrize(("n", "k"), [(16, 6), (32, 64), (96, 576), (112, 1030), (1040, 2100)])
def test_matches_fp64(rows: int, n: int, k: int, dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(rows * n + k)
    x, w = torch.randn(rows, k, generator=gen), torch.randn(n, k, generator=gen)
    x, w, b = x.to(dtype), w.to(dtype), torch.randn(n, generator=gen).to(dtype)
    got = KERNEL(x, PanelWeight.pack(w), b)
    expect = F.linear(x.double(), w.double(), b.double())
    assert got.shape == (rows, n) and got.dtype == dtype
    if dtype == torch.float32:
        torch.testing.assert_close(got.double(), expect, atol=1e-5 * k**0.5 * 4, rtol=1e-5)
    elif rows:
        assert (got.double() - expect).abs().max() <= bf16_tolerance(x, w)


def test_odd_k_only_in_fp32() -> None:
    x, w = torch.randn(3, 5), torch.randn(16, 5)
    torch.testing.assert_close(KERNEL(x, PanelWeight.pack(w)), F.linear(x, w))
    assert not KERNEL.takes(w.bfloat16())  # vdpbf16ps takes k in pairs: odd K stays with oneDNN


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_bias_leading_dims_and_threads(threads: int) -> None:
    x, w, b = torch.randn(2, 3, 40), torch.randn(160, 40), torch.randn(160)
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        got = KERNEL(x, PanelWeight.pack(w), b)
    finally:
        torch.set_num_threads(previous)
    torch.testing.assert_close(got, F.linear(x, w, b), atol=1e-4, rtol=1e-5)


def test_strided_input() -> None:
    w = torch.randn(64, 16)
    x = torch.randn(16, 6).t()  # not contiguous
    torch.testing.assert_close(KERNEL(x, PanelWeight.pack(w)), F.linear(x, w), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("counts", [[3, 0, 0, 17, 1, 0], [0, 0, 0, 0, 0, 2], [1] * 6])
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("threads", [1, 2])
def test_grouped_experts_match_one_call_per_expert(dtype, counts, with_bias, threads) -> None:
    """MoE: rows grouped by expert (some experts without rows) in one call, bit for bit as the
    kernel called once per expert (the same panels and sums)."""
    gen = torch.Generator().manual_seed(sum(counts))
    experts = [PanelWeight.pack(torch.randn(80, 64, generator=gen).to(dtype)) for _ in counts]
    biases = [torch.randn(80, generator=gen) for _ in counts] if with_bias else None
    x = torch.randn(sum(counts), 64, generator=gen).to(dtype)
    assert KERNEL.takes_grouped(experts)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        got = KERNEL.grouped(x, experts, counts, biases)
    finally:
        torch.set_num_threads(before)
    want, start = [], 0
    for e, n in enumerate(counts):
        want.append(KERNEL(x[start : start + n], experts[e], biases[e] if biases else None))
        start += n
    assert got.shape == (sum(counts), 80) and got.dtype == dtype
    torch.testing.assert_close(got, torch.cat(want), rtol=0, atol=0)
    assert not KERNEL.takes_grouped([experts[0], PanelWeight.pack(torch.randn(32, 64))])
