"""The C quantized-linear kernels against their pure-torch twins (dequantize, then an fp64 matmul of
the rounded input: bf16, or int8 per block of 32 for the VNNI kernel), for every code format, the
int8 kernel against the unrounded input within a worst-case bound, and the packed layout's row
dequantization."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from stencil.kernels import cpu_quant, reference
from stencil.kernels.quant_weight import SplitWeight, concat, pack

KERNEL = cpu_quant.load()  # int8 activations where the CPU has AVX512-VNNI, or AVX2 only
BF16_KERNEL = cpu_quant.load(int8_activations=False)
INT8 = KERNEL is not None and KERNEL.int8_activations
AVX2_KERNEL = cpu_quant.load_avx2()  # on AVX-512 CPUs too
# bits, group, zero code, with mins, super-block scales: Q8_0 / int8, Q4_0, Q4_1 / int4, Q5_0,
# Q5_1, Q6_K as fp16 products, then the K-quants as stored (int8 times an fp16 per 256): Q4_K,
# Q5_K, Q6_K
FORMATS = [
    (8, 32, 0, False, False),
    (4, 32, 8, False, False),
    (4, 32, 0, True, False),
    (5, 32, 16, False, False),
    (5, 32, 0, True, False),
    (6, 16, 32, False, False),
    (4, 32, 0, True, True),
    (5, 32, 0, True, True),
    (6, 16, 32, False, True),
]


def cases(shapes):
    """(format, *shape) for every format whose blocks fit the shape's K."""
    return [(f, *shape) for f in FORMATS for shape in shapes if not f[4] or shape[1] % 256 == 0]


def random_weight(bits, group, zero, with_min, supers, n, k, seed=0):
    rng = np.random.default_rng(seed)
    lo, hi = (-128, 127) if bits == 8 else (0, 2**bits - 1)
    codes = rng.integers(lo, hi + 1, size=(n, k)).astype(np.int8 if bits == 8 else np.uint8)
    if supers:  # fp16 values per 256 (one of them 0) times int8 (6-bit for mins, and for Q4/5_K)
        sup = [(rng.random((n, k // 256)) * 0.01).astype(np.float16) for _ in range(2)]
        sup[0][0, 0] = 0
        sup = [a.astype(np.float32) for a in sup]
        sub_lo = -128 if bits == 6 else 0
        per = [np.repeat(a, 256 // group, 1) for a in sup]
        scales = per[0] * rng.integers(sub_lo, 64, size=(n, k // group)).astype(np.float32)
        mins = -per[1] * rng.integers(0, 64, size=(n, k // group)).astype(np.float32)
        mins = mins if with_min else None
        kept = scales, mins
    else:
        scales = (rng.random((n, k // group)) * 0.1).astype(np.float32)
        mins = (rng.standard_normal((n, k // group)) * 0.1).astype(np.float32) if with_min else None
        kept = [
            None if a is None else a.astype(np.float16).astype(np.float32) for a in (scales, mins)
        ]
    value = (codes.astype(np.float32) - zero) * np.repeat(kept[0], group, 1)
    if with_min:
        value += np.repeat(kept[1], group, 1)
    args = (sup[0], -sup[1] if with_min else None) if supers else ()
    return pack(codes, scales, mins, bits, group, zero, *args), torch.from_numpy(value)


@pytest.mark.parametrize(("fmt", "n", "k"), cases([(48, 64), (40, 96), (64, 512)]))
def test_packed_rows_dequantize_exactly(fmt, n, k):
    w, value = random_weight(*fmt, n, k)
    torch.testing.assert_close(w.dequantize(), value, rtol=0, atol=0)
    ids = torch.tensor([n - 1, 0, 17, 17])
    torch.testing.assert_close(w.rows(ids), value[ids], rtol=0, atol=0)


SHAPES = [(48, 64, 1), (40, 96, 13), (64, 512, 70), (16, 32, 0)]


@pytest.mark.skipif(BF16_KERNEL is None, reason="no C compiler or no AVX512-BF16")
@pytest.mark.parametrize(("fmt", "n", "k", "rows"), cases(SHAPES))
def test_bf16_kernel_matches_twin(fmt, n, k, rows):
    w, value = random_weight(*fmt, n, k, seed=rows)
    gen = torch.Generator().manual_seed(n * k + rows)
    x, bias = torch.randn(rows, k, generator=gen), torch.randn(n, generator=gen)
    got = BF16_KERNEL(x, w, bias)
    xb = x.bfloat16().double()
    want = torch.nn.functional.linear(xb, value.double(), bias.double())
    assert got.shape == (rows, n) and got.dtype == torch.float32
    # exact products, fp32 sums over k terms in any order: |error| <= k * 2^-24 * sum |x w|
    bound = (k + 1) * 2.0**-24 * (xb.abs() @ value.double().abs().T + bias.double().abs())
    assert ((got.double() - want).abs() <= bound).all()
    twin = reference.quant_linear(x.bfloat16().float(), w, bias)
    assert ((got.double() - twin.double()).abs() <= 2 * bound).all()


@pytest.mark.skipif(not INT8, reason="no C compiler, or neither AVX512-VNNI nor AVX2")
@pytest.mark.parametrize(("fmt", "n", "k", "rows"), cases([*SHAPES, (32, 1024, 8)]))
def test_int8_kernel_matches_twin_and_fp32(fmt, n, k, rows):
    w, value = random_weight(*fmt, n, k, seed=rows)
    gen = torch.Generator().manual_seed(n * k + rows)  # the same draws whatever ran before
    x, bias = torch.randn(rows, k, generator=gen), torch.randn(n, generator=gen)
    x[:, :32] *= 50  # one block with a large value: its other values round coarsely
    got = KERNEL(x, w, bias)
    assert got.shape == (rows, n) and got.dtype == torch.float32
    # the same math as the kernel: exact integer dot products, fp32 scales and sums
    # (measured <= 3.1e-7 of max |out|)
    xq = reference.int8_rows(x)
    want = torch.nn.functional.linear(xq.double(), value.double(), bias.double())
    scale = want.abs().max().item() if rows else 1.0
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-6 * max(1.0, scale))
    twin = reference.quant_linear(xq, w, bias)  # fp32 sums of its own (outputs reach ~50)
    torch.testing.assert_close(got, twin, rtol=1e-5, atol=1e-5 * max(1.0, scale))
    # against the unrounded input: each value moves by at most half its block's step
    # d = max|block| / 127, so |out - x @ W.T| <= sum_k d_k / 2 * |w_k| (+ the fp32 sums above)
    step = x.view(rows, k // 32, 32).abs().amax(-1, keepdim=True) / 127
    half = (step / 2).expand(rows, k // 32, 32).reshape(rows, k)
    bound = torch.nn.functional.linear(half.double(), value.double().abs())
    exact = torch.nn.functional.linear(x.double(), value.double(), bias.double())
    assert ((got.double() - exact).abs() <= bound * (1 + 1e-5) + 1e-4).all()
    assert rows == 0 or (xq - x).abs().max() > 0  # the rounding is real (the bound is not vacuous)


@pytest.mark.skipif(KERNEL is None, reason="no C compiler, or neither AVX-512 nor AVX2")
def test_bf16_input_and_split_weight():
    a, va = random_weight(4, 32, 0, True, False, 32, 64, seed=1)
    b, vb = random_weight(6, 16, 32, False, False, 16, 64, seed=2)
    assert concat([a, b]) is None  # formats differ
    both = concat([a, a])
    torch.testing.assert_close(both.dequantize(), torch.cat([va, va]), rtol=0, atol=0)
    from stencil.kernels.cpu_linear import CpuLinear

    linear = CpuLinear(KERNEL)
    x = torch.randn(5, 64).bfloat16()
    got = linear(x, SplitWeight((a, b)))
    assert got.dtype == torch.bfloat16
    xr = reference.int8_rows(x.float()) if INT8 else x.float()  # as the kernel rounds it
    want = xr @ torch.cat([va, vb]).T
    torch.testing.assert_close(got.float(), want, rtol=2e-2, atol=5e-2)


@pytest.mark.skipif(not INT8, reason="no C compiler, or neither AVX512-VNNI nor AVX2")
@pytest.mark.parametrize("fmt", [FORMATS[0], FORMATS[2], FORMATS[5], FORMATS[6]])
@pytest.mark.parametrize("counts", [[3, 0, 0, 70, 1, 0], [0, 0, 0, 0, 0, 2], [0] * 6])
@pytest.mark.parametrize("with_bias", [False, True])
def test_grouped_experts_match_one_call_per_expert(fmt, counts, with_bias):
    """MoE: rows grouped by expert (some experts without rows, one past a 64-row tile) in one call,
    against the single-weight kernel per expert (bit for bit: the same tiles and sums)."""
    experts = [random_weight(*fmt, 48, 256, seed=e)[0] for e in range(len(counts))]
    biases = [torch.randn(48) for _ in counts] if with_bias else None
    x = torch.randn(sum(counts), 256)
    assert KERNEL.takes_grouped(experts)
    got = KERNEL.grouped(x, experts, counts, biases)
    want = reference.grouped_linear(x, experts, counts, biases, linear=KERNEL)
    assert got.shape == (sum(counts), 48)
    if sum(counts):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.skipif(not INT8, reason="no C compiler, or neither AVX512-VNNI nor AVX2")
@pytest.mark.parametrize("fmt", [FORMATS[0], FORMATS[8]])
@pytest.mark.parametrize(("tokens", "top"), [(1, 2), (7, 3), (40, 2)])
def test_grouped_gather_and_combine_in_the_call(fmt, tokens, top):
    """The MoE call with the gather of its rows (``rows``) and the weighted sum back into each
    token's row (``combine``) inside the kernel, bit for bit as the reference's ``x[rows]`` and
    ``index_add_`` around the same kernel."""
    experts = [random_weight(*fmt, 256, 256, seed=e)[0] for e in range(6)]
    down = [random_weight(*fmt, 128, 256, seed=10 + e)[0] for e in range(6)]
    gen = torch.Generator().manual_seed(tokens * top)
    x = torch.randn(tokens, 256, generator=gen)
    ids = torch.stack([torch.randperm(6, generator=gen)[:top] for _ in range(tokens)])
    flat = ids.flatten()
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=6).tolist()
    rows = order // top
    scale = torch.rand(tokens * top, 1, generator=gen)
    h = KERNEL.grouped(x, experts, counts, rows=rows)
    torch.testing.assert_close(h, KERNEL.grouped(x[rows], experts, counts), rtol=0, atol=0)
    got = KERNEL.grouped(h, down, counts, combine=(rows, scale, tokens))
    want = reference.grouped_linear(h, down, counts, linear=KERNEL, combine=(rows, scale, tokens))
    assert got.shape == (tokens, 128)
    torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.skipif(not INT8, reason="no C compiler, or neither AVX512-VNNI nor AVX2")
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("threads", [1, 2])
def test_int8_rows_do_not_depend_on_the_rows_beside_them(fmt, threads):
    """A row's output is the same bits alone (one-row decode) and inside any call (a k + 1-row
    verification step, a decode batch) however the rows are split, at 1 or 2 threads: greedy
    speculative decoding relies on it. 20 rows: VNNI passes of 8 rows and AMX tiles of 16."""
    w, _ = random_weight(*fmt, 48, 512, seed=3)
    gen = torch.Generator().manual_seed(7)
    x, bias = torch.randn(20, 512, generator=gen), torch.randn(48, generator=gen)
    x[3] *= 40  # rows of very different magnitudes
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        whole = KERNEL(x, w, bias)
        for sizes in ([1] * 20, [2, 4, 6, 8], [12, 8], [16, 4], [5, 7, 3, 5]):
            parts = torch.cat([KERNEL(p, w, bias) for p in x.split(sizes)])
            assert torch.equal(parts, whole), sizes
    finally:
        torch.set_num_threads(before)


@pytest.mark.skipif(AVX2_KERNEL is None, reason="no C compiler or no AVX2, FMA and F16C")
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("rows", [1, 4, 16, 64])
def test_avx2_kernel_matches_reference(fmt, rows):
    """The AVX2 int8 kernel (``csrc/quant_linear_avx2.c``) against the reference on the rounded
    rows, with a bias and an odd N (a padded strip), over 3 chunks of 256 k; where the CPU also
    runs the VNNI kernel, equal to it bit for bit (the same sums in the same order)."""
    n, k = 37, 768
    w, value = random_weight(*fmt, n, k, seed=rows)
    gen = torch.Generator().manual_seed(rows)
    x, bias = torch.randn(rows, k, generator=gen), torch.randn(n, generator=gen)
    x[:, :32] *= 50
    got = AVX2_KERNEL(x, w, bias)
    assert got.shape == (rows, n) and got.dtype == torch.float32
    xq = reference.int8_rows(x)
    want = torch.nn.functional.linear(xq.double(), value.double(), bias.double())
    scale = want.abs().max().item()
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-6 * max(1.0, scale))
    twin = reference.quant_linear(xq, w, bias)
    torch.testing.assert_close(got, twin, rtol=1e-5, atol=1e-5 * max(1.0, scale))
    no_bias = AVX2_KERNEL(x, w)
    torch.testing.assert_close(no_bias.double(), want - bias.double(), rtol=1e-5, atol=1e-5 * scale)
    if INT8 and KERNEL.i8_source != AVX2_KERNEL.i8_source:
        assert torch.equal(KERNEL(x, w, bias), got)


@pytest.mark.skipif(AVX2_KERNEL is None, reason="no C compiler or no AVX2, FMA and F16C")
@pytest.mark.parametrize("fmt", FORMATS)
def test_avx2_kernel_extreme_codes_do_not_overflow(fmt):
    """Every code at its largest (and 8-bit ones at -128 too) against rows at +-127 after
    rounding: the int16 pair sums the kernel adds before widening are at their largest."""
    bits, group, zero, with_min, supers = fmt
    n, k = 16, 512
    for code in (-128, 127) if bits == 8 else (2**bits - 1,):
        codes = torch.full((n, k), code, dtype=torch.int32)
        dtype = np.int8 if bits == 8 else np.uint8
        scales = np.full((n, k // group), 2**-7, np.float32)  # super-block scales times 1 and 2
        mins = np.full((n, k // group), -(2**-6), np.float32) if with_min else None
        sup = (np.full((n, k // 256), 2**-7, np.float32),) if supers else ()
        if supers:
            sup += (np.full((n, k // 256), -(2**-7), np.float32) if with_min else None,)
        w = pack(codes.numpy().astype(dtype), scales, mins, bits, group, zero, *sup)
        value = w.dequantize()
        for sign in (1.0, -1.0):
            x = torch.full((3, k), sign)
            x[1] *= torch.arange(k) % 2 * 2 - 1.0  # alternating signs
            got = AVX2_KERNEL(x, w)
            want = torch.nn.functional.linear(reference.int8_rows(x).double(), value.double())
            torch.testing.assert_close(got.double(), want, rtol=1e-6, atol=1e-4)


@pytest.mark.skipif(AVX2_KERNEL is None, reason="no C compiler or no AVX2, FMA and F16C")
@pytest.mark.parametrize("fmt", FORMATS)
def test_avx2_few_rows_path_equals_tiled_path(fmt):
    """Up to 4 rows the AVX2 kernel dots the packed codes directly (no expanded chunk): the same
    bits as those rows inside a batch of 9 (the tiled path), and the reference within tolerance,
    over 3 chunks of 256 k with a bias and a padded strip."""
    n, k = 37, 768
    w, value = random_weight(*fmt, n, k, seed=7)
    gen = torch.Generator().manual_seed(7)
    x, bias = torch.randn(9, k, generator=gen), torch.randn(n, generator=gen)
    x[:, :32] *= 50
    tiled = AVX2_KERNEL(x, w, bias)
    want = torch.nn.functional.linear(
        reference.int8_rows(x).double(), value.double(), bias.double()
    )
    torch.testing.assert_close(tiled.double(), want, rtol=1e-5, atol=1e-6 * want.abs().max().item())
    for rows in (1, 2, 3, 4):
        assert torch.equal(AVX2_KERNEL(x[:rows], w, bias), tiled[:rows]), rows
        assert torch.equal(AVX2_KERNEL(x[5 - rows : 5], w), AVX2_KERNEL(x, w)[5 - rows : 5]), rows
