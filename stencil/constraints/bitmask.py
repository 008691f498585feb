"""Packed token bitmasks: ``int32[rows, ceil(V / 32)]``, bit ``t % 32`` of word ``t // 32`` is
token ``t``; 1 = allowed. The xgrammar / llguidance / vLLM format."""

from __future__ import annotations

import torch


def bitmask_words(vocab_size: int) -> int:
    return (vocab_size + 31) // 32


def allocate_token_bitmask(rows: int, vocab_size: int) -> torch.Tensor:
    """A CPU bitmask with every token allowed."""
    return torch.full((rows, bitmask_words(vocab_size)), -1, dtype=torch.int32)


def bitmask_to_bool(bitmask: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """``bool[rows, vocab_size]`` view of a packed bitmask (for tests and debugging)."""
    if bitmask.dim() == 1:
        bitmask = bitmask.unsqueeze(0)
    shifts = torch.arange(32, dtype=torch.int32, device=bitmask.device)
    bits = (bitmask.unsqueeze(-1) >> shifts) & 1  # [rows, words, 32]
    return bits.flatten(1)[:, :vocab_size].bool()
