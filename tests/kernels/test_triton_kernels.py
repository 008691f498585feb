"""Kernel tests: ``reference`` against naive oracles, the Triton kernels against ``reference``.

The Triton kernels are checked on CPU by the Triton interpreter in a subprocess (see
``interpreted_cases.py``); tests marked ``cuda`` launch them compiled on a real GPU.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from kernel_helpers import (
    ATTN_CASES,
    BITMASK_CASES,
    AttnCase,
    make_attn_inputs,
    naive_attention,
    naive_mask,
    random_bitmask,
)

from stencil.kernels import get_kernels, reference

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
_CASES_FILE = Path(__file__).with_name("interpreted_cases.py")


# ----------------------------------------------------------------------------- reference


@pytest.mark.parametrize("case", list(BITMASK_CASES))
def test_reference_bitmask_matches_naive(case: str) -> None:
    vocab, words = BITMASK_CASES[case]
    gen = torch.Generator().manual_seed(vocab + words)
    logits = torch.randn(3, vocab, generator=gen)
    bitmask = random_bitmask(3, words, gen)
    got = logits.clone()
    reference.apply_token_bitmask_inplace(got, bitmask, torch.tensor([0, 2]))
    assert torch.equal(got, naive_mask(logits, bitmask, [0, 2]))


def test_reference_bitmask_on_inference_tensor() -> None:
    """Logits made under ``torch.inference_mode()`` (the model runner's) are masked outside it."""
    gen = torch.Generator().manual_seed(5)
    bitmask = random_bitmask(3, 3, gen)
    with torch.inference_mode():
        logits = torch.randn(3, 70, generator=gen)
    expect = naive_mask(logits.clone(), bitmask, [2])
    reference.apply_token_bitmask_inplace(logits, bitmask, torch.tensor([2]))
    assert torch.equal(logits, expect)


@pytest.mark.parametrize("name", list(ATTN_CASES))
def test_reference_attention_matches_naive(name: str) -> None:
    args = make_attn_inputs(ATTN_CASES[name], torch.float32)
    got = reference.paged_attention(**args)
    torch.testing.assert_close(got.double(), naive_attention(**args), atol=1e-5, rtol=1e-5)


def test_reference_write_kv_slots() -> None:
    key, value = torch.randn(3, 2, 4), torch.randn(3, 2, 4)
    k_cache, v_cache = torch.zeros(3, 4, 2, 4), torch.zeros(3, 4, 2, 4)
    reference.write_kv(key, value, k_cache, v_cache, torch.tensor([9, 0, 4]))
    for t, slot in enumerate([9, 0, 4]):
        assert torch.equal(k_cache[slot // 4, slot % 4], key[t])
        assert torch.equal(v_cache[slot // 4, slot % 4], value[t])


# ----------------------------------------------------------------------------- Triton (interpreter)


def test_interpreted_kernels() -> None:
    """Runs ``interpreted_cases.py`` (Triton vs reference) under ``TRITON_INTERPRET=1``, in one
    subprocess: its failures are listed in this test's message."""
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    cmd = [sys.executable, "-m", "pytest", str(_CASES_FILE), "-q", "-p", "no:cacheprovider",
           "-W", "ignore::DeprecationWarning"]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-8000:] + proc.stderr[-2000:]
    summary = proc.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "skipped" not in summary, summary


# ----------------------------------------------------------------------------- dispatch


def test_get_kernels_torch_is_reference() -> None:
    k = get_kernels(torch.device("cpu"), "torch")
    assert k.name == "reference"
    assert k.paged_attention is reference.paged_attention
    assert k.write_kv is reference.write_kv
    assert k.apply_token_bitmask_inplace is reference.apply_token_bitmask_inplace


def test_get_kernels_cuda_is_triton() -> None:
    pytest.importorskip("triton")
    k = get_kernels(torch.device("cuda"))  # a device object needs no GPU
    assert k.name == "triton"
    assert k.paged_attention.__module__ == "stencil.kernels.triton_attention"
    assert k.write_kv.__module__ == "stencil.kernels.triton_kv"
    assert k.apply_token_bitmask_inplace.__module__ == "stencil.kernels.triton_bitmask"


def test_import_has_no_triton_side_effect() -> None:
    code = "import sys, stencil.kernels; assert 'triton' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


# ----------------------------------------------------------------------------- real GPU


def _to_cuda(args: dict) -> dict:
    return {k: v.cuda() if isinstance(v, torch.Tensor) else v for k, v in args.items()}


@cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("window", [None, 50])
@pytest.mark.parametrize("splits", [None, 1, 7])
def test_cuda_attention_matches_reference(
    dtype: torch.dtype, window: int | None, splits: int | None
) -> None:
    from stencil.kernels.triton_attention import paged_attention_splits

    case = AttnCase(8, 2, 64, 16, (1, 130, 1, 1, 7), (300, 130, 1, 77, 200), window=window)
    args = make_attn_inputs(case, dtype, seed=4)
    expect = reference.paged_attention(**args).float()  # on CPU
    got = paged_attention_splits(**_to_cuda(args), num_splits=splits).float().cpu()
    tol = 1e-4 if dtype == torch.float32 else 3e-2
    torch.testing.assert_close(got, expect, atol=tol, rtol=tol)


@cuda
def test_cuda_write_kv_and_bitmask_match_reference() -> None:
    k = get_kernels(torch.device("cuda"))
    key, value = torch.randn(50, 4, 64), torch.randn(50, 4, 64)
    slots = torch.randperm(64 * 16)[:50]
    k_ref, v_ref = torch.zeros(64, 16, 4, 64), torch.zeros(64, 16, 4, 64)
    reference.write_kv(key, value, k_ref, v_ref, slots)
    k_gpu, v_gpu = torch.zeros_like(k_ref).cuda(), torch.zeros_like(v_ref).cuda()
    k.write_kv(key.cuda(), value.cuda(), k_gpu, v_gpu, slots.cuda())
    assert torch.equal(k_gpu.cpu(), k_ref) and torch.equal(v_gpu.cpu(), v_ref)
    logits = torch.randn(8, 151_936)
    bitmask = random_bitmask(8, 4748, torch.Generator().manual_seed(0))
    idx = torch.tensor([5, 1, 2])
    expect, got = logits.clone(), logits.cuda()
    reference.apply_token_bitmask_inplace(expect, bitmask, idx)
    k.apply_token_bitmask_inplace(got, bitmask.cuda(), idx.cuda())
    assert torch.equal(got.cpu(), expect)


@cuda
def test_cuda_decode_attention_timing() -> None:
    """Launches a realistic decode batch, times it, and checks the result is finite."""
    case = AttnCase(32, 8, 128, 16, (1,) * 64, (2048,) * 64)
    args = _to_cuda(make_attn_inputs(case, torch.bfloat16, seed=5))
    attention = get_kernels(torch.device("cuda")).paged_attention
    attention(**args)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(10):
        out = attention(**args)
    torch.cuda.synchronize()
    elapsed_ms = (time.perf_counter() - start) * 100
    assert torch.isfinite(out).all()
    print(f"decode 64 x 2048 paged attention: {elapsed_ms:.3f} ms")
