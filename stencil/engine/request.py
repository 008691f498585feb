"""A request: its prompt and the n sequences generating its completions."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field

from stencil.engine.outputs import CompletionOutput, RequestOutput
from stencil.engine.sampling_params import SamplingParams
from stencil.engine.sequence import Sequence


@dataclass(eq=False)
class Request:
    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    params: SamplingParams
    seqs: list[Sequence] = field(default_factory=list)
    compile_future: Future | None = None

    @property
    def finished(self) -> bool:
        return all(s.is_finished for s in self.seqs)

    def output(self) -> RequestOutput:
        return RequestOutput(
            request_id=self.request_id,
            prompt=self.prompt,
            prompt_token_ids=self.prompt_token_ids,
            outputs=[_completion(s) for s in self.seqs],
            finished=self.finished,
            num_cached_tokens=self.seqs[0].num_cached_tokens if self.seqs else 0,
            embedding=self.seqs[0].embedding if self.seqs else None,
        )


def _completion(seq: Sequence) -> CompletionOutput:
    text = seq.text
    stops = seq.params.stop
    if stops and not seq.is_finished:  # hold back what may be the start of a stop string
        text = text[: max(len(text) - max(map(len, stops)) + 1, 0)]
    return CompletionOutput(
        index=seq.index,
        text=text,
        token_ids=seq.output_token_ids,  # a fresh slice: the caller owns it
        finish_reason=seq.finish_reason,
        stop_reason=seq.stop_reason,
        logprobs=list(seq.logprobs) if seq.logprobs is not None else None,
        cumulative_logprob=seq.cumulative_logprob,
        error=seq.error,
        error_type=seq.error_type,
        trace=seq.trace if seq.is_finished else None,
    )
