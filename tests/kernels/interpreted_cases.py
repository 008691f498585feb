"""Triton kernels run by the Triton interpreter on CPU, compared with ``reference``.

Not collected by a plain ``pytest`` run (the name does not match ``test_*.py``):
``test_triton_kernels.py::test_interpreted_kernels`` runs this file in a subprocess with
``TRITON_INTERPRET=1``. Triton reads that variable when ``triton`` is first imported (its own
``tl.zeros``/``tl.max``/... are ``@jit`` functions) and again at each ``@triton.jit``, so it must be
set before anything in the process imports triton; a subprocess is the only robust way to keep the
rest of the suite (and the real-GPU tests) compiled. By hand:
``TRITON_INTERPRET=1 pytest tests/kernels/interpreted_cases.py``.
"""

from __future__ import annotations

import os

import pytest
import torch

if os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip("needs TRITON_INTERPRET=1 before triton is imported", allow_module_level=True)
pytest.importorskip("triton")

from kernel_helpers import (  # noqa: E402
    ATTN_CASES,
    BITMASK_CASES,
    BITMASK_INDICES,
    AttnCase,
    check_bitmask_against_reference,
    make_attn_inputs,
    naive_attention,
    random_bitmask,
)

from stencil.kernels import reference  # noqa: E402
from stencil.kernels.triton_attention import (  # noqa: E402
    paged_attention,
    paged_attention_splits,
)
from stencil.kernels.triton_bitmask import apply_token_bitmask_inplace  # noqa: E402
from stencil.kernels.triton_kv import write_kv  # noqa: E402

# ----------------------------------------------------------------------------- bitmask


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("case", list(BITMASK_CASES))
@pytest.mark.parametrize("indices", list(BITMASK_INDICES.values()), ids=list(BITMASK_INDICES))
def test_bitmask(case: str, dtype: torch.dtype, indices: list[int] | None) -> None:
    check_bitmask_against_reference(apply_token_bitmask_inplace, case, dtype, indices)


def test_bitmask_strided_logits() -> None:
    gen = torch.Generator().manual_seed(1)
    base = torch.randn(3, 200, generator=gen)
    bitmask = random_bitmask(3, 4, gen)
    expect, got = base.clone(), base.clone()
    reference.apply_token_bitmask_inplace(expect[:, 10:110], bitmask)  # row stride 200
    apply_token_bitmask_inplace(got[:, 10:110], bitmask)
    assert torch.equal(got, expect)


def test_bitmask_inference_tensor() -> None:
    gen = torch.Generator().manual_seed(2)
    bitmask = random_bitmask(2, 3, gen)
    with torch.inference_mode():
        logits = torch.randn(2, 70, generator=gen)
    expect = logits.clone()
    reference.apply_token_bitmask_inplace(expect, bitmask)
    apply_token_bitmask_inplace(logits, bitmask)
    assert torch.equal(logits, expect)


# ----------------------------------------------------------------------------- write_kv


@pytest.mark.parametrize("cache_dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("kv_heads", "dim", "block_size"), [(2, 8, 4), (1, 20, 16), (3, 16, 4)])
def test_write_kv(kv_heads: int, dim: int, block_size: int, cache_dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(kv_heads * dim)
    num_blocks, tokens = 6, 9
    fused = torch.randn(tokens, 2 * kv_heads + 1, dim, generator=gen)  # key/value are views
    key, value = fused[:, :kv_heads], fused[:, kv_heads + 1 :]
    slots = torch.randperm(num_blocks * block_size, generator=gen)[:tokens]
    shape = (num_blocks, block_size, kv_heads, dim)
    k_cache, v_cache = (torch.randn(shape, generator=gen).to(cache_dtype) for _ in range(2))
    k_ref, v_ref = k_cache.clone(), v_cache.clone()
    reference.write_kv(key, value, k_ref, v_ref, slots)
    write_kv(key, value, k_cache, v_cache, slots)
    # The interpreter truncates fp32 -> bf16 where the GPU rounds to nearest: allow one ulp.
    tol = 0.0 if cache_dtype == torch.float32 else 2**-7
    torch.testing.assert_close(k_cache, k_ref, atol=0.0, rtol=tol)
    torch.testing.assert_close(v_cache, v_ref, atol=0.0, rtol=tol)


def test_write_kv_skips_negative_slots() -> None:
    key = torch.randn(3, 2, 8)
    k_cache, v_cache = torch.zeros(2, 4, 2, 8), torch.zeros(2, 4, 2, 8)
    write_kv(key, -key, k_cache, v_cache, torch.tensor([5, -1, 0]))
    flat = k_cache.view(-1, 2, 8)
    assert torch.equal(flat[5], key[0]) and torch.equal(flat[0], key[2])
    assert flat[[1, 2, 3, 4, 6, 7]].abs().sum() == 0
    assert torch.equal(v_cache.view(-1, 2, 8)[5], -key[0])


# ----------------------------------------------------------------------------- attention


@pytest.mark.parametrize("name", list(ATTN_CASES))
def test_attention_fp32(name: str) -> None:
    args = make_attn_inputs(ATTN_CASES[name], torch.float32, seed=1)
    got = paged_attention(**args)
    torch.testing.assert_close(got, reference.paged_attention(**args), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("splits", [1, 3])
@pytest.mark.parametrize("name", ["gqa2-bs4-window5", "decode-only", "mha-bs4"])
def test_attention_sinks(name: str, splits: int) -> None:
    """GPT-OSS's sinks, in the one-pass kernel and through the split merge, against fp64."""
    args = make_attn_inputs(ATTN_CASES[name], torch.float32, seed=3)
    args["sinks"] = torch.linspace(-3.0, 6.0, args["q"].shape[1])
    got = paged_attention_splits(**args, num_splits=splits)
    torch.testing.assert_close(got.double(), naive_attention(**args), atol=1e-4, rtol=1e-4)


# fp16 only: the interpreter's ``tl.dot`` multiplies bf16 bit patterns as uint16
# (triton-lang/triton#11584, "not supported yet"); bf16 attention is checked on a real GPU.
@pytest.mark.parametrize("dtype", [torch.float16])
@pytest.mark.parametrize("name", ["gqa2-bs16", "mqa-bs4-dim20", "gqa2-bs4-window5"])
def test_attention_low_precision(name: str, dtype: torch.dtype) -> None:
    """Against fp64: no worse than twice the reference's own error (floor 3e-2)."""
    args = make_attn_inputs(ATTN_CASES[name], dtype, seed=2)
    got = paged_attention(**args)
    assert got.dtype == dtype
    exact = naive_attention(**args)
    err_ref = (reference.paged_attention(**args).double() - exact).abs().max().item()
    err = (got.double() - exact).abs().max().item()
    assert err <= max(3e-2, 2 * err_ref), (err, err_ref)


@pytest.mark.parametrize(
    ("name", "splits"),
    [("gqa2-bs16", 3), ("gqa2-bs4-window5", 2), ("decode-only", 16), ("empty-row", 5)],
)
def test_attention_split_keys(name: str, splits: int) -> None:
    """The flash-decoding path (key range split across programs, then merged); 16 splits of
    short contexts leave some splits without keys."""
    args = make_attn_inputs(ATTN_CASES[name], torch.float32, seed=4)
    got = paged_attention_splits(**args, num_splits=splits)
    torch.testing.assert_close(got, reference.paged_attention(**args), atol=1e-4, rtol=1e-4)


def test_attention_tensor_offsets() -> None:
    args = make_attn_inputs(ATTN_CASES["gqa2-bs4-window5"], torch.float32, seed=3)
    expect = reference.paged_attention(**args)
    args["cu_seqlens_q"] = torch.tensor(args["cu_seqlens_q"], dtype=torch.int32)
    args["context_lens"] = torch.tensor(args["context_lens"], dtype=torch.int32)
    torch.testing.assert_close(paged_attention(**args), expect, atol=1e-4, rtol=1e-4)


def test_attention_no_queries() -> None:
    args = make_attn_inputs(AttnCase(4, 2, 8, 4, (0, 0), (3, 5)), torch.float32)
    assert paged_attention(**args).shape == (0, 4, 8)
