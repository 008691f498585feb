"""Per-step attention metadata: where the step's tokens go in the paged cache and what they read."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass(slots=True)
class AttentionMetadata:
    slot_mapping: torch.Tensor  # [T] int64, cache slot of each new token
    block_tables: torch.Tensor  # [B, max_blocks] int32
    cu_seqlens_q: list[int]  # B + 1 offsets of each sequence's new tokens in the step
    context_lens: list[int]  # [B] tokens in cache per sequence after this step's writes
    prompt_lens: list[int] = field(default_factory=list)  # [B] each sequence's prompt length
    plan: dict = field(default_factory=dict)  # per-step scratch the CPU attention fills once
    # the sliding-window layers' own slots and tables (their KV pool), None without one
    sliding: AttentionMetadata | None = None
