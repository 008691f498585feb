"""Per-request sampling parameters (vLLM names), validated before a request is scheduled."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from stencil.engine.errors import RequestError

if TYPE_CHECKING:
    from stencil.constraints.spec import Constraint
    from stencil.engine.spec_decode.proposer import Proposer

MAX_N = 16
MAX_TOP_LOGPROBS = 20
MAX_STOP_STRINGS = 16
MAX_STOP_STRING_LEN = 256
MAX_ID_LIST = 1024
LOGPROBS_MODES = ("processed_logprobs", "raw_logprobs")


@dataclass(slots=True)
class SamplingParams:
    """How to sample one request's completions.

    ``logprobs``: None = none; k >= 0 = the chosen token's logprob plus the top k.
    ``logprobs_mode``: what those logprobs are of (vLLM's names): ``"processed_logprobs"``, the
    distribution sampled from (under the constraint's mask); ``"raw_logprobs"``, the model's own
    (the forward's logits, before the mask): how much the model wanted the token it was given;
    then no token is jumped forward (each comes from a forward and has its raw logprob).
    ``constraint``: a :class:`stencil.Constraint`; the output then always matches it.
    ``close_on_length``: inside a constraint, reserve enough of ``max_tokens`` to close the
    structure validly instead of stopping mid-structure with ``finish_reason="length"``.
    ``reasoning_end``: the constraint applies only after this text appears in the output (a
    reasoning model's end marker, e.g. harmony's final channel); None = the engine's
    ``EngineConfig.reasoning_end``.
    ``proposer``: what the caller knows of this request's source, for speculative decoding's
    drafts (``spec_decode/proposer.py``: an object with ``propose(output, max_chars)``; it never
    changes the output, only how many steps it takes).
    """

    n: int = 1
    max_tokens: int | None = 256
    min_tokens: int = 0
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: int | None = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    logit_bias: dict[int, float] | None = None
    stop: list[str] = field(default_factory=list)
    stop_token_ids: list[int] = field(default_factory=list)
    ignore_eos: bool = False
    logprobs: int | None = None
    logprobs_mode: str = "processed_logprobs"
    skip_special_tokens: bool = True
    include_stop_str_in_output: bool = False
    constraint: Constraint | None = None
    close_on_length: bool = False
    reasoning_end: str | None = None
    trace: bool = False  # record a ConstraintTrace (engine/constraint_trace.py) per completion
    proposer: Proposer | None = None

    def __post_init__(self) -> None:
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        self.stop = list(self.stop or [])
        self.stop_token_ids = list(self.stop_token_ids or [])
        self._check()

    @property
    def asks_raw_logprobs(self) -> bool:
        """Whether logprobs are asked, of the model's own distribution (``raw_logprobs``)."""
        return self.logprobs is not None and self.logprobs_mode == "raw_logprobs"

    def _check(self) -> None:
        _require(
            isinstance(self.n, int) and 1 <= self.n <= MAX_N,
            f"n must be in [1, {MAX_N}], got {self.n}",
        )
        if self.max_tokens is not None:
            _require(self.max_tokens >= 1, f"max_tokens must be >= 1, got {self.max_tokens}")
        _require(self.min_tokens >= 0, f"min_tokens must be >= 0, got {self.min_tokens}")
        if self.max_tokens is not None:
            _require(self.min_tokens <= self.max_tokens, "min_tokens must be <= max_tokens")
        _require(self.temperature >= 0.0, f"temperature must be >= 0, got {self.temperature}")
        _require(0.0 < self.top_p <= 1.0, f"top_p must be in (0, 1], got {self.top_p}")
        _require(
            self.top_k >= 0 or self.top_k == -1, f"top_k must be >= 0 (or -1), got {self.top_k}"
        )
        _require(0.0 <= self.min_p <= 1.0, f"min_p must be in [0, 1], got {self.min_p}")
        _require(-2.0 <= self.presence_penalty <= 2.0, "presence_penalty must be in [-2, 2]")
        _require(-2.0 <= self.frequency_penalty <= 2.0, "frequency_penalty must be in [-2, 2]")
        _require(0.0 < self.repetition_penalty <= 10.0, "repetition_penalty must be in (0, 10]")
        if self.logprobs is not None:
            _require(
                0 <= self.logprobs <= MAX_TOP_LOGPROBS,
                f"logprobs must be in [0, {MAX_TOP_LOGPROBS}], got {self.logprobs}",
            )
        _require(
            self.logprobs_mode in LOGPROBS_MODES,
            f"logprobs_mode must be one of {', '.join(LOGPROBS_MODES)}, got {self.logprobs_mode!r}",
        )
        _require(
            self.proposer is None or callable(getattr(self.proposer, "propose", None)),
            "proposer must be an object with a propose(output, max_chars) method, "
            f"got {type(self.proposer).__name__}",
        )
        _require(len(self.stop) <= MAX_STOP_STRINGS, f"at most {MAX_STOP_STRINGS} stop strings")
        for s in self.stop:
            _require(
                isinstance(s, str) and 0 < len(s) <= MAX_STOP_STRING_LEN,
                f"stop strings must be 1..{MAX_STOP_STRING_LEN} characters",
            )
        _require(len(self.stop_token_ids) <= MAX_ID_LIST, f"at most {MAX_ID_LIST} stop_token_ids")
        if self.logit_bias:
            _require(
                len(self.logit_bias) <= MAX_ID_LIST, f"at most {MAX_ID_LIST} logit_bias entries"
            )
            for v in self.logit_bias.values():
                _require(-100.0 <= v <= 100.0, "logit_bias values must be in [-100, 100]")

    def check_token_ids(self, vocab_size: int) -> None:
        """Raise RequestError when any token id this request names is outside the vocabulary."""
        ids = list(self.stop_token_ids) + list((self.logit_bias or {}).keys())
        for i in ids:
            _require(
                isinstance(i, int) and 0 <= i < vocab_size,
                f"token id {i} is outside the vocabulary [0, {vocab_size})",
            )

    @property
    def greedy(self) -> bool:
        return self.temperature < 1e-5


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise RequestError(message)
