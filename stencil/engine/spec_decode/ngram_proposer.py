"""Prompt lookup (n-gram) drafting: find the context's last n tokens earlier in the context (the
prompt and the output so far) and propose the tokens that followed them there."""

from __future__ import annotations

import numpy as np


class NgramProposer:
    def __init__(self, min_n: int, max_n: int) -> None:
        self.min_n = min_n
        self.max_n = max_n

    def propose(self, context: list[int], k: int) -> list[int]:
        """Up to ``k`` tokens that followed the most recent earlier occurrence of the longest
        suffix n-gram (``max_n`` down to ``min_n``) of ``context``; [] where none occurs."""
        return self.lookup(context, k)[0]

    def lookup(self, context: list[int], k: int) -> tuple[list[int], int]:
        """``propose``'s tokens and the n of the suffix found (0: none).

        One pass over the context finds where its last token occurred before; each longer
        suffix only narrows those ends (an n + 1-gram occurrence ends where an n-gram one does),
        so the cost is one comparison of the context plus the few ends left."""
        if k <= 0 or len(context) <= self.min_n:
            return [], 0
        ctx = np.asarray(context, dtype=np.int64)  # [L]
        ends = np.flatnonzero(ctx[:-1] == ctx[-1])  # occurrences of the 1-gram, by last index
        found, end = 0, -1
        for n in range(1, min(self.max_n, len(ctx) - 1) + 1):
            if n > 1:  # keep the ends whose occurrence also matches the suffix's n-th last token
                ends = ends[ends >= n - 1]
                ends = ends[ctx[ends - (n - 1)] == ctx[-n]]
            if not ends.size:
                break
            if n >= self.min_n:
                found, end = n, int(ends[-1])  # the most recent occurrence
        if not found:
            return [], 0
        return ctx[end + 1 : end + 1 + k].tolist(), found
