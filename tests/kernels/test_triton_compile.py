"""The Triton kernels compile ahead of time for an H100/H200 (sm_90) without a GPU.

The interpreter (``interpreted_cases.py``) checks numerics but not what only the compiler
rejects (loop-carried type changes, unsupported ops, dot shapes); this lowers each kernel
variant the engine launches through ptxas to a cubin.
"""

from __future__ import annotations

from pathlib import Path

import pytest

triton = pytest.importorskip("triton")

from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from stencil.kernels import triton_attention, triton_bitmask, triton_kv  # noqa: E402

_ATTN_PTRS = ("q_ptr", "k_cache_ptr", "v_cache_ptr", "out_ptr")
_ATTN_I32_PTRS = {
    "block_tables_ptr": "*i32", "tiles_ptr": "*i32", "qk_scale": "fp32", "sinks_ptr": "*fp32",
}  # fmt: skip


def _compile(fn, types: dict[str, str], constexprs: dict[str, object]) -> None:
    if not isinstance(fn, triton.runtime.JITFunction):
        pytest.skip("kernels were created by the interpreter (TRITON_INTERPRET=1)")
    signature = {
        name: "constexpr" if name in constexprs else types.get(name, "i32") for name in fn.arg_names
    }
    src = ASTSource(fn=fn, signature=signature, constexprs=constexprs)
    kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
    assert kernel.asm.get("cubin")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")  # 3.9's default, stated: no warning


@pytest.mark.parametrize(
    ("dtype", "split", "window", "group", "block_m"),
    [("bf16", False, False, 4, 16), ("bf16", True, True, 4, 16), ("fp16", False, True, 1, 16),
     ("fp32", True, False, 8, 16), ("bf16", False, False, 32, 32), ("bf16", True, True, 4, 64)],
)  # fmt: skip
def test_attention_compiles(
    dtype: str, split: bool, window: bool, group: int, block_m: int
) -> None:
    ptr = "*" + dtype
    types = {**dict.fromkeys(_ATTN_PTRS, ptr), **_ATTN_I32_PTRS}
    types |= {"part_out_ptr": "*fp32" if split else ptr, "part_lse_ptr": "*fp32" if split else ptr}
    constexprs = {
        "BLOCK_SIZE": 16, "GROUP": group, "BLOCK_M": block_m, "BLOCK_N": 32, "D_PAD": 128,
        "HAS_WINDOW": window, "SPLIT": split, "HAS_SINKS": window,  # sinks beside windows: GPT-OSS
        "DOT_PRECISION": "ieee" if dtype == "fp32" else "tf32",
    }  # fmt: skip
    _compile(triton_attention._paged_attention_kernel, types, constexprs)


def test_merge_bitmask_write_kv_compile() -> None:
    types = {
        "out_ptr": "*bf16",
        "part_out_ptr": "*fp32",
        "part_lse_ptr": "*fp32",
        "rows_ptr": "*i32",
        "sinks_ptr": "*fp32",
    }
    for has_sinks in (False, True):
        _compile(triton_attention._merge_splits_kernel, types,
                 {"S_PAD": 16, "D_PAD": 128, "HAS_SINKS": has_sinks})  # fmt: skip
    for has_indices in (False, True):
        types = {"logits_ptr": "*fp32", "bitmask_ptr": "*i32", "indices_ptr": "*i64"}
        _compile(triton_bitmask._apply_bitmask_kernel, types,
                 {"HAS_INDICES": has_indices, "BLOCK": 2048})  # fmt: skip
    types = {"key_ptr": "*bf16", "value_ptr": "*bf16", "k_cache_ptr": "*bf16",
             "v_cache_ptr": "*bf16", "slot_ptr": "*i64"}  # fmt: skip
    _compile(triton_kv._write_kv_kernel, types, {"H_PAD": 8, "D_PAD": 128})
