"""What a forward costs on this model and this machine, measured while the engine runs.

A decode or verification step of ``rows`` rows takes about ``fixed + per_row * rows`` seconds:
``fixed`` reading the weights once, ``per_row`` each row's arithmetic. The line is fitted by
least squares over recent steps of at most ``MAX_ROWS`` rows (long prefills are another regime),
each past step's weight decaying by ``DECAY`` per new one. ``step_rows`` = fixed / per_row is what
an accepted draft saves in rows: ~3 on the embedded 135M model (``chance.STEP_ROWS``, its prior
until steps of two sizes are seen), ~8 on a 1.5B file whose step is bound by reading 1 GB. It sets
how far a chain of drafts pays (a chain's chance above 1 / (1 + step_rows), ``chance.py``) and, with the acceptance rate measured alongside,
the batch above which drafting costs more rows than it saves (``max_batch``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from stencil.engine.spec_decode.chance import STEP_ROWS

MAX_ROWS = 64  # steps larger than this are not observed
DECAY = 0.98  # a past step's weight per new one (~50 steps)
MIN_STEPS = 8  # observed steps before the fit is used
MIN_SPREAD = 0.05  # variance of the observed row counts (rows^2) the fit needs
PRIOR_ACCEPTANCE = 0.7


@dataclass(slots=True)
class StepCost:
    prior: float = STEP_ROWS
    steps: int = 0
    acceptance: float = PRIOR_ACCEPTANCE  # accepted / drafted, exponentially weighted
    _sums: list[float] = field(default_factory=lambda: [0.0] * 5)  # w, Σrows, Σs, Σrows², Σrows·s

    def observe(self, rows: int, seconds: float) -> None:
        """One forward of ``rows`` rows took ``seconds``."""
        if not 0 < rows <= MAX_ROWS or seconds <= 0:
            return
        s = self._sums
        for i, v in enumerate((1.0, rows, seconds, rows * rows, rows * seconds)):
            s[i] = s[i] * DECAY + v
        self.steps += 1

    def observe_drafts(self, drafted: int, accepted: int) -> None:
        """A verification: ``accepted`` of ``drafted`` drafts were what the model wrote."""
        if drafted:
            keep = DECAY**drafted
            self.acceptance = self.acceptance * keep + accepted / drafted * (1 - keep)

    def step_rows(self) -> float:
        """``fixed / per_row`` of the fitted line (1-64), or the prior while it cannot be fitted."""
        w, x, y, xx, xy = self._sums
        spread = xx / w - (x / w) ** 2 if w else 0.0
        if self.steps < MIN_STEPS or spread < MIN_SPREAD:
            return self.prior
        per_row = (xy / w - x / w * y / w) / spread
        fixed = y / w - per_row * x / w
        if per_row <= 0 or fixed <= 0:
            return self.prior
        return min(max(fixed / per_row, 1.0), 64.0)

    def max_batch(self) -> int:
        """Running sequences up to which drafting pays. B sequences each drafting k, a·k
        accepted: a step of fixed + B(1 + k) rows' time writes B(1 + a·k) tokens instead of B
        for fixed + B rows; that is faster while B < step_rows · a / (1 - a)."""
        a = min(max(self.acceptance, 0.05), 0.95)
        return max(1, math.ceil(round(self.step_rows() * a / (1 - a), 6)) - 1)
