"""Prompt lookup (n-gram) drafting: find the context's last n tokens earlier in the context (the
prompt and the output so far) and propose the tokens that followed them there."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


class NgramProposer:
    def __init__(self, min_n: int, max_n: int) -> None:
        self.min_n = min_n
        self.max_n = max_n

    def propose(self, context: list[int], k: int) -> list[int]:
        """Up to ``k`` tokens that followed the most recent earlier occurrence of the longest
        suffix n-gram (``max_n`` down to ``min_n``) of ``context``; [] where none occurs."""
        return self.lookup(context, k)[0]

    def lookup(self, context: list[int], k: int) -> tuple[list[int], int]:
        """``propose``'s tokens and the n of the suffix found (0: none)."""
        if k <= 0 or len(context) <= self.min_n:
            return [], 0
        ctx = np.asarray(context, dtype=np.int64)  # [L]
        for n in range(min(self.max_n, len(ctx) - 1), self.min_n - 1, -1):
            windows = sliding_window_view(ctx[:-1], n)  # [L - n, n]: every earlier n-gram
            hits = np.flatnonzero((windows == ctx[-n:]).all(axis=1))
            if hits.size:
                start = int(hits[-1]) + n  # the most recent occurrence's continuation
                return ctx[start : start + k].tolist(), n
        return [], 0
