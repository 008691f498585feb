"""One completion being generated: its tokens, KV blocks, constraint matcher and stop state."""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from stencil.engine.outputs import PositionLogprobs
from stencil.engine.pooling import Pooler
from stencil.engine.sampling_params import SamplingParams


class SequenceStatus(enum.Enum):
    WAITING_FOR_CONSTRAINT = "waiting_for_constraint"
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(eq=False)
class Sequence:
    seq_id: int
    request_id: str
    index: int  # which of the request's n completions
    token_ids: list[int]
    prompt_len: int
    params: SamplingParams
    max_len: int  # prompt + output tokens never exceed this
    generator: torch.Generator
    matcher: Any = None  # stencil.constraints Matcher, or None
    status: SequenceStatus = SequenceStatus.WAITING
    num_computed_tokens: int = 0
    num_cached_tokens: int = 0  # prompt tokens served from the prefix cache
    block_table: list[int] = field(default_factory=list)
    sliding_table: list[int] = field(
        default_factory=list
    )  # sliding-window layers' blocks (-1: none)
    block_hashes: list[int] = field(default_factory=list)  # chain hash of each full block's tokens
    num_hashed_blocks: int = 0  # leading block_table blocks known to be in the prefix cache
    pending_forks: list[Sequence] = field(default_factory=list)  # siblings that share our prefill
    fork_of: Sequence | None = None  # set for one step: sample from this parent's logits row
    spec_token_ids: list[int] = field(default_factory=list)  # this step's speculative drafts
    # output state
    text: str = ""
    prefix_offset: int = 0
    read_offset: int = 0
    finish_reason: str | None = None
    stop_reason: int | str | None = None
    error: str | None = None
    error_type: str | None = None  # "constraint": the request's constraint could go no further
    logprobs: list[PositionLogprobs] | None = None
    cumulative_logprob: float = 0.0
    arrival_time: float = field(default_factory=time.monotonic)
    first_token_time: float | None = None
    reasoning_done: bool = True  # False while a reasoning model is still thinking
    text_flushed: bool = False  # the final detokenization already ran
    close_hopeless: bool = False  # close_on_length found no closing path that fits the budget
    close_need: int = 0  # close_on_length: tokens the last measured closing path takes
    close_probe_at: int = 0  # close_on_length: measure it again at this many tokens
    pooler: Pooler | None = None  # an embedding request (prefill only, no sampling)
    embedding: list[float] | None = None
    trace: Any = None  # a ConstraintTrace when params.trace (engine/constraint_trace.py)

    def __post_init__(self) -> None:
        self.prefix_offset = max(self.prompt_len - 5, 0)
        self.read_offset = self.prompt_len
        if self.params.logprobs is not None:
            self.logprobs = []

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def output_token_ids(self) -> list[int]:
        return self.token_ids[self.prompt_len :]

    @property
    def num_output_tokens(self) -> int:
        return len(self.token_ids) - self.prompt_len

    @property
    def is_finished(self) -> bool:
        return self.status == SequenceStatus.FINISHED

    def finish(
        self,
        reason: str,
        stop_reason: int | str | None = None,
        error: str | None = None,
        error_type: str | None = None,
    ) -> None:
        self.status = SequenceStatus.FINISHED
        self.finish_reason = reason
        self.stop_reason = stop_reason
        self.error = error
        self.error_type = error_type
