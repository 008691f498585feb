"""Triton twin of ``reference.apply_token_bitmask_inplace`` (the xgrammar / vLLM bitmask format).

``bitmask`` is ``int32[R, W]``: bit ``j`` of word ``w`` allows token ``32 * w + j`` (1 = allowed).
Logits columns at or beyond ``32 * W`` are disallowed. The grid is (row, vocab block); a program
only writes ``-inf`` where a token is disallowed and never reads the logits.
"""

import torch
import triton
import triton.language as tl

_BLOCK = 2048  # tokens per program


@triton.jit
def _apply_bitmask_kernel(
    logits_ptr,
    bitmask_ptr,
    indices_ptr,
    stride_lr,
    stride_lv,
    stride_br,
    stride_bw,
    vocab,
    num_words,
    HAS_INDICES: tl.constexpr,
    BLOCK: tl.constexpr,
):
    if HAS_INDICES:
        row = tl.load(indices_ptr + tl.program_id(0)).to(tl.int64)
    else:
        row = tl.program_id(0).to(tl.int64)
    tok = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)  # [BLOCK]
    word_idx = tok // 32
    in_vocab = tok < vocab
    word = tl.load(
        bitmask_ptr + row * stride_br + word_idx * stride_bw,
        mask=in_vocab & (word_idx < num_words),
        other=0,
    )
    allowed = ((word >> (tok % 32)) & 1) != 0
    neg_inf = tl.full([BLOCK], float("-inf"), tl.float32)
    tl.store(
        logits_ptr + row * stride_lr + tok * stride_lv,
        neg_inf.to(logits_ptr.dtype.element_ty),
        mask=in_vocab & ~allowed,
    )


def apply_token_bitmask_inplace(
    logits: torch.Tensor,  # [R, V] float
    bitmask: torch.Tensor,  # [R, W] int32, bit j of word w = token 32 * w + j allowed
    indices: torch.Tensor | None = None,  # rows of logits (and bitmask) to mask; None = all
) -> None:
    """Set ``logits`` to -inf where the bitmask bit is 0 (tokens past ``32 * W`` too)."""
    num_rows = logits.shape[0] if indices is None else indices.numel()
    vocab = logits.shape[1]
    if num_rows == 0 or vocab == 0:
        return
    assert bitmask.dtype == torch.int32, "bitmask must be int32"
    if indices is not None:
        indices = indices.to(device=logits.device, dtype=torch.int64)
    grid = (num_rows, triton.cdiv(vocab, _BLOCK))
    _apply_bitmask_kernel[grid](
        logits,
        bitmask,
        indices if indices is not None else bitmask,
        logits.stride(0),
        logits.stride(1),
        bitmask.stride(0),
        bitmask.stride(1),
        vocab,
        bitmask.shape[1],
        HAS_INDICES=indices is not None,
        BLOCK=_BLOCK,
    )
