"""Embedding requests: a prompt's final hidden states pooled into one L2-normalized vector.

An embedding request is a sequence with a ``Pooler``: it is prefilled (chunk by chunk, never from
the prefix cache, since every hidden state counts) and never samples; the model runner hands
each chunk's hidden states to ``add``, and once the whole prompt is computed the output
processor takes ``embedding()`` and finishes the sequence.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(slots=True)
class Pooler:
    mode: str  # "last" | "mean"
    total: torch.Tensor | None = None  # [hidden] running sum ("mean") or the last state
    rows: int = 0

    def add(self, hidden: torch.Tensor) -> None:
        """One prefill chunk's final hidden states, ``[n, hidden]``."""
        hidden = hidden.float()
        if self.mode == "mean":
            chunk = hidden.sum(0)
            self.total = chunk if self.total is None else self.total + chunk
        else:
            self.total = hidden[-1].clone()
        self.rows += hidden.shape[0]

    def embedding(self) -> list[float]:
        """The L2-normalized pooled vector (the pooler is spent afterwards)."""
        vec = self.total / self.rows if self.mode == "mean" else self.total
        self.total = None
        return torch.nn.functional.normalize(vec, dim=0).tolist()
