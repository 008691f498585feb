"""The C paged-attention kernel for CPU against the fp64 oracle, its fallbacks, and its build cache."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from kernel_helpers import ATTN_CASES, AttnCase, make_attn_inputs, naive_attention

from stencil.kernels import get_kernels, reference
from stencil.kernels.cpu_attention import CpuPagedAttention, load


@pytest.fixture(scope="module")
def kernel() -> CpuPagedAttention:
    k = load()
    assert k is not None, "the C kernel did not build (is a C compiler installed?)"
    return k


def _head_major(cache: torch.Tensor) -> torch.Tensor:
    """The same values stored ``[kv_heads, blocks, block_size, dim]`` (the model runner's layout)."""
    return cache.permute(2, 0, 1, 3).contiguous().permute(1, 2, 0, 3)


@pytest.mark.parametrize("layout", ["block-major", "head-major"])
@pytest.mark.parametrize("name", list(ATTN_CASES))
def test_cpu_attention_matches_naive(kernel, name: str, layout: str) -> None:
    args = make_attn_inputs(ATTN_CASES[name], torch.float32)
    if layout == "head-major":
        args["k_cache"], args["v_cache"] = (
            _head_major(args["k_cache"]),
            _head_major(args["v_cache"]),
        )
    got = kernel(**args)
    assert got.shape == args["q"].shape and got.dtype == torch.float32
    torch.testing.assert_close(got.double(), naive_attention(**args), atol=1e-5, rtol=1e-5)


SINK_CASES = ["gqa2-bs4-window5", "gqa3-bs16-dim64", "decode-only", "empty-row", "mha-bs4"]


@pytest.mark.parametrize("name", SINK_CASES)
def test_attention_sinks_match_naive(kernel, name: str) -> None:
    """GPT-OSS's sinks (a logit per head in each softmax denominator, some above every score):
    the C kernel and the reference against the fp64 oracle."""
    args = make_attn_inputs(ATTN_CASES[name], torch.float32)
    heads = args["q"].shape[1]
    args["sinks"] = torch.linspace(-3.0, 6.0, heads)
    expect = naive_attention(**args)
    torch.testing.assert_close(kernel(**args).double(), expect, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(
        reference.paged_attention(**args).double(), expect, atol=1e-5, rtol=1e-5
    )
    without = naive_attention(**{**args, "sinks": None})
    assert (expect - without).abs().max() > 1e-2  # the sinks change the result


@pytest.mark.parametrize("name", ["gqa2-bs4-window5", "gqa3-bs16-dim64", "decode-only", "mha-bs4"])
def test_attention_softcap_matches_naive(kernel, name: str) -> None:
    """Gemma 2's soft-capped scores (a cap below the largest scores, so it bites), in the C
    kernel and the reference against the fp64 oracle."""
    args = make_attn_inputs(ATTN_CASES[name], torch.float32)
    args["q"] = args["q"] * 8  # scores well past the cap
    args["softcap"] = 2.0
    expect = naive_attention(**args)
    torch.testing.assert_close(kernel(**args).double(), expect, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(
        reference.paged_attention(**args).double(), expect, atol=1e-5, rtol=1e-5
    )
    without = naive_attention(**{**args, "softcap": None})
    assert (expect - without).abs().max() > 1e-2  # the cap changes the result


@pytest.mark.parametrize("name", ["gqa2-bs16", "gqa3-bs16-dim64", "gqa2-bs16-dim32-window7"])
def test_cpu_attention_bfloat16(kernel, name: str) -> None:
    """bf16 caches (dims that are multiples of 32 take the AVX512-BF16 dot products where the
    CPU has them): the oracle, and the fp32 kernel on the same values to within bf16 rounding."""
    args = make_attn_inputs(ATTN_CASES[name], torch.bfloat16)
    args["k_cache"], args["v_cache"] = _head_major(args["k_cache"]), _head_major(args["v_cache"])
    got = kernel(**args)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.double(), naive_attention(**args), atol=2e-2, rtol=2e-2)
    wide = {
        k: v.float() if torch.is_tensor(v) and v.is_floating_point() else v for k, v in args.items()
    }
    expect = kernel(**wide).to(torch.bfloat16)
    torch.testing.assert_close(got.float(), expect.float(), atol=1e-3, rtol=8e-3)


def test_cpu_attention_long_prefill_tiles(kernel) -> None:
    """A chunk longer than one unit's tile of positions, 8 query heads per kv head, dim 128."""
    case = AttnCase(16, 2, 128, 16, (1, 150, 1), (300, 170, 33), window=None)
    args = make_attn_inputs(case, torch.float32)
    torch.testing.assert_close(
        kernel(**args).double(), naive_attention(**args), atol=1e-5, rtol=1e-5
    )


# contexts of several 64-key chunks (the kernel's softmax step): chunks of 4, 2, 1 and 8 blocks,
# windows that start inside a chunk, decodes beside prefill chunks
MULTI_CHUNK_CASES = {
    "bs16-smollm2": AttnCase(9, 3, 64, 16, (1, 1, 40, 1), (300, 129, 200, 64)),
    "bs32-window100": AttnCase(9, 3, 64, 32, (1, 70), (250, 190), window=100),
    "bs64-gqa7-window37": AttnCase(14, 2, 64, 64, (1, 1, 5), (130, 64, 260), window=37),
    "bs8-dim32": AttnCase(4, 2, 32, 8, (3, 1), (150, 97)),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", list(MULTI_CHUNK_CASES))
def test_cpu_attention_over_several_chunks(kernel, name: str, dtype: torch.dtype) -> None:
    args = make_attn_inputs(MULTI_CHUNK_CASES[name], dtype)
    args["k_cache"], args["v_cache"] = _head_major(args["k_cache"]), _head_major(args["v_cache"])
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(kernel(**args).double(), naive_attention(**args), atol=tol, rtol=tol)


def test_cpu_attention_plan_is_shared_across_layers(kernel) -> None:
    args = make_attn_inputs(ATTN_CASES["decode-only"], torch.float32)
    plan: dict = {}
    first = kernel(**args, plan=plan)
    assert len(plan) == 1
    args["q"] = args["q"] * 2
    second = kernel(**args, plan=plan)
    assert len(plan) == 1
    torch.testing.assert_close(second.double(), naive_attention(**args), atol=1e-5, rtol=1e-5)
    assert not torch.equal(first, second)


def test_cpu_attention_refuses_contexts_beyond_the_block_table(kernel) -> None:
    """The C kernel reads cache blocks through the table unchecked: the wrapper checks first."""
    args = make_attn_inputs(ATTN_CASES["decode-only"], torch.float32)
    args["context_lens"] = [c + 4 * args["block_tables"].shape[1] for c in args["context_lens"]]
    with pytest.raises(ValueError, match="exceed"):
        kernel(**args)


def test_cpu_attention_falls_back_beyond_its_buffers(kernel) -> None:
    """head_dim 320 exceeds the kernel's unit buffers: the reference computes it, same result."""
    args = make_attn_inputs(AttnCase(2, 1, 320, 4, (1, 3), (5, 3)), torch.float32)
    torch.testing.assert_close(kernel(**args), reference.paged_attention(**args))


def test_get_kernels_cpu(kernel) -> None:
    assert get_kernels("cpu").name == "cpu"
    torch_set = get_kernels("cpu", "torch")
    assert torch_set.name == "reference" and torch_set.paged_attention is reference.paged_attention


def test_build_is_cached_and_missing_compiler_falls_back(tmp_path) -> None:
    """A fresh cache dir builds the library once; without a compiler, the torch path is chosen."""
    code = (
        "import os, stencil.kernels.cpu_attention as c; assert c.load() is not None; "
        "d = os.environ['STENCIL_CACHE_DIR'] + '/kernels'; "
        "print([(f, os.stat(d + '/' + f).st_mtime_ns) for f in sorted(os.listdir(d))])"
    )
    env = {"STENCIL_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    first = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    again = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert first.stdout == again.stdout and ".so" in first.stdout  # reused, not rebuilt
    fresh = {
        "STENCIL_CACHE_DIR": str(tmp_path / "empty"),
        "PATH": "/usr/bin:/bin",
        "CC": "/nonexistent",
    }
    code = "from stencil.kernels import get_kernels; print(get_kernels('cpu').name)"
    out = subprocess.run(
        [sys.executable, "-c", code], env=fresh, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "reference"


def test_cpu_attention_reads_queries_from_a_qkv_view(kernel) -> None:
    """q as the model passes it: [T, heads, dim] inside the fused qkv projection (token stride
    larger than heads x dim) is read in place, with the same result as a contiguous copy."""
    args = make_attn_inputs(ATTN_CASES["gqa2-bs16"], torch.float32)
    t, heads, dim = args["q"].shape
    qkv = torch.randn(t, (heads + 4) * dim)
    qkv[:, : heads * dim] = args["q"].reshape(t, -1)
    args["q"] = qkv[:, : heads * dim].view(t, heads, dim)
    assert not args["q"].is_contiguous()
    torch.testing.assert_close(
        kernel(**args).double(), naive_attention(**args), atol=1e-5, rtol=1e-5
    )


# (heads, kv heads, dim, block size, window, softcap, sinks): SmolLM2's heads, 4-row AVX512 dot
# products (dim % 16 == 0) and the scalar path (dim 8), windows (9 keys, and 100 keys
# across 64-key chunks), Gemma 2's soft cap, GPT-OSS's sinks, 48-key chunks that do not divide 128
ROW_INVARIANCE_CASES = {
    "smollm2-bs16": (9, 3, 64, 16, None, None, False),
    "gqa2-dim32-bs4": (4, 2, 32, 4, None, None, False),
    "mha-dim64-window9": (4, 4, 64, 16, 9, None, False),
    "gqa3-dim64-window100-sinks": (6, 2, 64, 16, 100, None, True),
    "gqa2-dim8": (4, 2, 8, 4, None, None, False),
    "gqa2-dim64-softcap": (4, 2, 64, 16, None, 3.0, False),
    "smollm2-bs48": (9, 3, 64, 48, None, None, False),
}
# contexts around the kernel's 64-key chunks and past 128 and 256 keys
ROW_INVARIANCE_CONTEXTS = (7, 64, 65, 127, 128, 129, 200, 255, 256, 257, 300)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", list(ROW_INVARIANCE_CASES))
def test_cpu_attention_is_row_invariant(kernel, name: str, dtype: torch.dtype) -> None:
    """A position's output is the same, bit for bit, computed alone (a decode step) and among
    the 1-12 positions of a speculative verification step, on 1 thread or 2, alone in its step or
    beside other sequences: greedy speculative decoding is exact only if no op's numerics depend
    on the rows per step, nor on the threads or the other sequences sharing the step."""
    heads, kv_heads, dim, bs, window, softcap, sinks = ROW_INVARIANCE_CASES[name]
    gen = torch.Generator().manual_seed(7)
    top = max(ROW_INVARIANCE_CONTEXTS)
    blocks = -(-top // bs) + 1
    k_cache, v_cache = (
        torch.randn(blocks, bs, kv_heads, dim, generator=gen).to(dtype) for _ in range(2)
    )
    tables = torch.randperm(blocks, generator=gen).to(torch.int32).view(1, -1)
    q = 2 * torch.randn(top, heads, dim, generator=gen).to(dtype)  # position p's query: q[p]
    kw = dict(
        scale=dim**-0.5,
        sliding_window=window,
        softcap=softcap,
        sinks=torch.linspace(-2.0, 4.0, heads) if sinks else None,
    )
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        decode = [
            kernel(q[p : p + 1], k_cache, v_cache, tables, [0, 1], [p + 1], **kw)[0]
            for p in range(top)
        ]
        for t in (1, 2):
            torch.set_num_threads(t)
            for ctx in ROW_INVARIANCE_CONTEXTS:
                for n in range(1, min(12, ctx) + 1):
                    verify = kernel(q[ctx - n : ctx], k_cache, v_cache, tables, [0, n], [ctx], **kw)
                    for i in range(n):
                        assert torch.equal(decode[ctx - n + i], verify[i]), (t, ctx, n, i)
        # beside 7 other sequences (enough work units: not split), the same bits again
        for ctx in ROW_INVARIANCE_CONTEXTS:
            n = min(6, ctx)
            batch = kernel(
                q[ctx - n : ctx].repeat(8, 1, 1),
                k_cache,
                v_cache,
                tables.repeat(8, 1),
                [n * b for b in range(9)],
                [ctx] * 8,
                **kw,
            )
            for i in range(n):
                assert torch.equal(decode[ctx - n + i], batch[i]), (ctx, n, i)
    finally:
        torch.set_num_threads(threads)
