"""What the engine returns: vLLM-shaped RequestOutput / CompletionOutput (cumulative, not deltas)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Logprob:
    token_id: int
    token: str
    logprob: float
    raw: bytes | None = None
    """The token's bytes where they are not ``token``'s UTF-8 (it ends inside a character:
    ``token`` is U+FFFD); ``token_bytes.token_piece``."""


@dataclass(slots=True)
class PositionLogprobs:
    """The sampled token's logprob and the top-k alternatives at one output position."""

    chosen: Logprob
    top: list[Logprob] = field(default_factory=list)


@dataclass(slots=True)
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int]
    finish_reason: str | None = None  # "stop" | "length" | "abort" | "error" | None (running)
    stop_reason: int | str | None = None  # the stop string / token id that ended it
    logprobs: list[PositionLogprobs] | None = None
    cumulative_logprob: float = 0.0
    error: str | None = None
    error_type: str | None = None
    """With ``finish_reason`` "error": "constraint" when the request's constraint could go no
    further (its grammar's limits, a decode-time check with no continuation: the request's
    fault), None for an internal failure."""
    trace: Any = None  # the ConstraintTrace, once finished, when asked (SamplingParams.trace)

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass(slots=True)
class RequestOutput:
    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]
    finished: bool = False
    num_cached_tokens: int = 0
    metrics: dict[str, float] = field(default_factory=dict)
    embedding: list[float] | None = None  # set for embedding requests (L2-normalized)
