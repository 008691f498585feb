"""The C token bitmask against its torch twin ``reference.apply_token_bitmask_inplace``: the
same -inf entries for every case of ``BITMASK_CASES`` (vocabularies shorter and longer than the
bitmask's 32 * W), row subsets, strided logits, inference tensors; other dtypes take the twin."""

from __future__ import annotations

import pytest
import torch
from kernel_helpers import (
    BITMASK_CASES,
    BITMASK_INDICES,
    check_bitmask_against_reference,
    random_bitmask,
)

from stencil.kernels import get_kernels, reference
from stencil.kernels.cpu_bitmask import CpuTokenBitmask, load


@pytest.fixture(scope="module")
def kernel() -> CpuTokenBitmask:
    k = load()
    assert k is not None, "the C library did not build (is a C compiler installed?)"
    return k


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", list(BITMASK_CASES))
@pytest.mark.parametrize("indices", list(BITMASK_INDICES.values()), ids=list(BITMASK_INDICES))
def test_matches_the_twin(kernel, case: str, dtype: torch.dtype, indices) -> None:
    check_bitmask_against_reference(kernel, case, dtype, indices)


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
