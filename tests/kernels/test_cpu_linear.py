"""The oneDNN linear of the CPU kernel set against ``F.linear`` and an fp64 oracle."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from stencil.kernels import cpu_linear, get_kernels
from stencil.kernels.panel_linear import PanelWeight

pytestmark = pytest.mark.skipif(not cpu_linear.available(), reason="PyTorch built without oneDNN")


@pytest.mark.parametrize("rows", [0, 1, 7, 64])
@pytest.mark.parametrize("bias", [False, True])
def test_linear_matches_fp64(rows: int, bias: bool) -> None:
    gen = torch.Generator().manual_seed(rows)
    x, w = torch.randn(rows, 576, generator=gen), torch.randn(960, 576, generator=gen)
    b = torch.randn(960, generator=gen) if bias else None
    got = cpu_linear.linear(x, w, b)
    expect = F.linear(x.double(), w.double(), None if b is None else b.double())
    assert got.shape == (rows, 960) and got.dtype == torch.float32
    torch.testing.assert_close(got.double(), expect, atol=1e-4, rtol=1e-5)


def test_linear_bfloat16() -> None:
    """oneDNN where it takes bf16 on this CPU, else ``F.linear``: a bf16 model runs either way."""
    x, w = torch.randn(5, 64).bfloat16(), torch.randn(32, 64).bfloat16()
    got = cpu_linear.linear(x, w)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), F.linear(x.float(), w.float()), atol=0.3, rtol=2e-2)


@pytest.mark.parametrize("shape", ["3-d", "strided", "float64"])
def test_inputs_onednn_does_not_take_go_to_f_linear(shape: str) -> None:
    w = torch.randn(8, 16, dtype=torch.float64 if shape == "float64" else torch.float32)
    x = {
        "3-d": torch.randn(2, 3, 16),
        "strided": torch.randn(16, 5).t(),
        "float64": torch.randn(4, 16, dtype=torch.float64),
    }[shape]
    torch.testing.assert_close(cpu_linear.linear(x, w), F.linear(x, w))


def test_cpu_kernel_set_uses_it() -> None:
    assert isinstance(get_kernels("cpu").linear, cpu_linear.CpuLinear)
    assert not isinstance(get_kernels("cpu", "torch").linear, cpu_linear.CpuLinear)


@pytest.mark.parametrize("rows", [0, 1, 17, 64, 300])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_packed_weight_matches_fp64(rows: int, dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(rows)
    x, w = torch.randn(rows, 576, generator=gen), torch.randn(960, 576, generator=gen)
    b = torch.randn(960, generator=gen).to(dtype)
    x, w = x.to(dtype), w.to(dtype)
    packed = cpu_linear.pack_weight(w)
    assert packed.is_mkldnn == (dtype in cpu_linear.onednn_dtypes()) and packed.shape == w.shape
    got = cpu_linear.linear(x, packed, b)
    expect = F.linear(x.double(), w.double(), b.double())
    assert got.shape == (rows, 960) and got.dtype == dtype
    tol = {"atol": 1e-4, "rtol": 1e-5} if dtype == torch.float32 else {"atol": 0.5, "rtol": 2e-2}
    torch.testing.assert_close(got.double(), expect, **tol)


def test_packed_weight_takes_any_input_shape() -> None:
    w = torch.randn(8, 16)
    x = torch.randn(16, 6).t()[:, None, :]  # [6, 1, 16], not contiguous
    torch.testing.assert_close(cpu_linear.linear(x, cpu_linear.pack_weight(w)), F.linear(x, w))


def test_cpu_kernel_set_packs_weights() -> None:
    kernels = get_kernels("cpu")
    assert kernels.pack_weight == kernels.linear.pack_weight
    assert get_kernels("cpu", "torch").pack_weight is None
    panel = kernels.linear.panel
    for dtype in (torch.float32, torch.bfloat16):  # the C GEMM where it runs the dtype, or oneDNN
        packed = kernels.pack_weight(torch.randn(32, 16).to(dtype))
        assert isinstance(packed, PanelWeight) == (panel is not None and dtype in panel.dtypes)
        onednn = dtype in cpu_linear.onednn_dtypes()  # else left as it is, for F.linear
        assert isinstance(packed, PanelWeight) or packed.is_mkldnn == onednn
    assert kernels.pack_weight(torch.randn(24, 16)).is_mkldnn  # N not a multiple of 16
