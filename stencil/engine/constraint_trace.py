"""A per-sequence record of what the constraint did at each output token (``SamplingParams(
trace=True)``; off by default, and then nothing is recorded or computed): whether the model chose
the token among the N tokens the mask allowed, the grammar forced it (jump-forward), or
``close_on_length`` appended it to close the structure; plus the time the sequence's mask fills
took and the forward passes of the steps it sampled in (shared with the batch)."""

from __future__ import annotations

from dataclasses import dataclass, field

SAMPLED, FORCED, CLOSED = "sampled", "forced", "closed"


@dataclass(slots=True)
class TraceStep:
    token_id: int
    kind: str  # SAMPLED | FORCED | CLOSED
    allowed: int | None  # tokens the mask allowed (a sampled token under a constraint)


@dataclass(slots=True)
class ConstraintTrace:
    steps: list[TraceStep] = field(default_factory=list)
    mask_seconds: float = 0.0
    forward_seconds: float = 0.0
    num_steps: int = 0  # engine steps that sampled a token for the sequence
    _allowed: int | None = None  # the mask of the step in progress

    def on_mask(self, allowed: int, mask_seconds: float, forward_seconds: float) -> None:
        """The guided stage filled this step's mask: ``allowed`` tokens, after a forward."""
        self._allowed = allowed
        self.mask_seconds += mask_seconds
        self.forward_seconds += forward_seconds
        self.num_steps += 1

    def on_tokens(self, token_ids: list[int], closed: bool) -> None:
        """The tokens one step appended: the sampled one then forced ones, or a closing path."""
        for i, token in enumerate(token_ids):
            if closed:
                self.steps.append(TraceStep(token, CLOSED, None))
            else:
                kind, allowed = (SAMPLED, self._allowed) if i == 0 else (FORCED, None)
                self.steps.append(TraceStep(token, kind, allowed))
        self._allowed = None
