"""The C token bitmask against its torch twin ``reference.apply_token_bitmask_inplace``: the
same -inf entries for every case of ``BITMASK_CASES`` (vocabularies shorter and longer than the
bitmask's 32 * W), row subsets, strided logits, inference tensors; other dtypes take the twin."""

from __future__ import annotations

import pytest
import torch
from kernel_helpers import BITMASK_CASES, random_bitmask

from stencil.kernels import get_kernels, reference
from stencil.kernels.cpu_bitmask import CpuTokenBitmask, load


@pytest.fixture(scope="module")
def kernel() -> CpuTokenBitmask:
    k = load()
    assert k is not None, "the C library did not build (is a C compiler installed?)"
    return k


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", list(BITMASK_CASES))
@pytest.mark.parametrize("indices", [None, [3, 0], [1], []], ids=["all", "3-0", "1", "none"])
def test_matches_the_twin(kernel, case: str, dtype: torch.dtype, indices) -> None:
    vocab, words = BITMASK_CASES[case]
    gen = torch.Generator().manual_seed(vocab * 7 + words)
    logits = torch.randn(4, vocab, generator=gen).to(dtype)
    bitmask = random_bitmask(4, words, gen)
    idx = None if indices is None else torch.tensor(indices, dtype=torch.int32)
    expect, got = logits.clone(), logits.clone()
    reference.apply_token_bitmask_inplace(expect, bitmask, idx)
    kernel(got, bitmask, idx)
    assert torch.equal(got, expect)


def test_strided_logits_and_inference_tensors(kernel) -> None:
    gen = torch.Generator().manual_seed(1)
    bitmask = random_bitmask(3, 4, gen)
    with torch.inference_mode():
        base = torch.randn(3, 200, generator=gen)
        expect, got = base.clone(), base.clone()
    reference.apply_token_bitmask_inplace(expect[:, 10:110], bitmask)  # row stride 200
    kernel(got[:, 10:110], bitmask)
    assert torch.equal(got, expect)
    assert torch.isinf(got[:, 10:110]).any() and not torch.isinf(got[:, :10]).any()


def test_rows_outside_the_logits_or_the_bitmask_raise(kernel) -> None:
    logits, bitmask = torch.zeros(2, 64), torch.zeros(2, 2, dtype=torch.int32)
    with pytest.raises(IndexError, match="outside"):
        kernel(logits, bitmask, torch.tensor([2], dtype=torch.int32))
    with pytest.raises(IndexError, match="outside"):
        kernel(torch.zeros(3, 64), bitmask)
    assert torch.equal(logits, torch.zeros(2, 64))


def test_the_cpu_kernel_set_uses_it(kernel) -> None:
    assert isinstance(get_kernels("cpu").apply_token_bitmask_inplace, CpuTokenBitmask)
