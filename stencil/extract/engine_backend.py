"""The in-process backend of ``stencil extract``: every job through one engine as one continuous
batch, outcomes streamed back as each request finishes (so results are written as they come).

Also what each Ray worker actor runs (``stencil.extract.ray_backend``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from stencil.constraints import Constraint, ConstraintError, uses_grounding
from stencil.engine.errors import RequestError
from stencil.engine.sampling_params import SamplingParams
from stencil.extract.prompt import HFTokenCounter, PromptBuilder, PromptTemplate
from stencil.extract.records import Job, Outcome


@dataclass(frozen=True, slots=True)
class ExtractSpec:
    """Everything about the extraction that is the same for every document (picklable)."""

    schema: dict[str, Any]
    template: PromptTemplate
    instructions: str = ""
    max_tokens: int = 256
    temperature: float = 0.0
    grounded: bool = True
    """Plain string fields (no format but email, no pattern, enum, const) only take verbatim
    spans of the document; ``"x-grounded": true`` in the schema grounds a field either way."""
    ground_numbers: bool = True
    """Free number fields only take numbers the document states."""
    ground_dates: bool = True
    """Free ``format: date`` fields only take dates the document states (normalized to ISO;
    free when it states none or writes one ambiguously, such as 03/04/2024)."""

    def constraint(self, document: str | None = None) -> Constraint:
        """The constraint for one document (``None``: the document-independent check)."""
        if document is None:
            document = "x" if self.per_document else None
        if document is None:
            return Constraint.json_schema(self.schema, whitespace="compact")
        return Constraint.json_schema(
            self.schema,
            whitespace="compact",
            source_text=document,
            ground_strings=self.grounded,
            ground_numbers=self.ground_numbers,
            ground_dates=self.ground_dates,
        )

    @property
    def per_document(self) -> bool:
        """Whether each document gets its own constraint (grounding)."""
        per_document = self.grounded or self.ground_numbers or self.ground_dates
        return per_document or uses_grounding(self.schema)


class EngineExtractor:
    """Runs jobs through ``llm`` (a ``stencil.LLM``) under the schema constraint."""

    def __init__(self, llm: Any, spec: ExtractSpec, window: int | None = None) -> None:
        self.llm = llm
        self.engine = llm.engine
        self.spec = spec
        tokenizer = llm.get_tokenizer()
        self.builder = PromptBuilder(
            spec.template,
            spec.schema,
            spec.instructions,
            spec.max_tokens,
            self.engine.max_model_len,
            HFTokenCounter(tokenizer),
            lambda messages: len(self._prompt_ids(messages)),
        )
        self.params = SamplingParams(
            max_tokens=spec.max_tokens,
            temperature=spec.temperature,
            constraint=None if spec.per_document else spec.constraint(),
            close_on_length=True,
        )
        room = self.engine.config.max_waiting_requests
        self.window = min(window or room, room)

    def _prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
        tok = self.engine.tokenizer
        text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return tok(text, add_special_tokens=False).input_ids

    def run(self, jobs: Iterable[Job]) -> Iterator[Outcome]:
        """Yield one Outcome per job, in completion order; at most ``window`` in the engine."""
        pending = iter(jobs)
        inflight: dict[str, tuple[Job, list[str]]] = {}
        exhausted = False
        try:
            while True:
                while not exhausted and len(inflight) < self.window:
                    job = next(pending, None)
                    if job is None:
                        exhausted = True
                    elif (failed := self._add(job, inflight)) is not None:
                        yield failed
                if not inflight:
                    return
                for out in self.engine.step():
                    if out.finished and out.request_id in inflight:
                        job, warnings = inflight.pop(out.request_id)
                        yield _outcome(job, out, warnings)
        finally:
            for rid in inflight:
                self.engine.abort_request(rid)

    def _add(self, job: Job, inflight: dict[str, tuple[Job, list[str]]]) -> Outcome | None:
        """Queue one job; an Outcome with the error when it cannot be queued."""
        rid = f"extract-{job.key}"
        try:
            prompt = self.builder.build(job.path, job.text)
            ids = self._prompt_ids(prompt.messages)
            params = self.params
            if self.spec.per_document:
                params = replace(params, constraint=self.spec.constraint(prompt.document))
            self.engine.add_request(rid, ids, params)
        except (ValueError, RequestError, ConstraintError) as e:
            return Outcome(job.key, error=str(e))
        inflight[rid] = (job, prompt.warnings)
        return None


def _outcome(job: Job, out: Any, warnings: list[str]) -> Outcome:
    completion = out.outputs[0]
    error = None
    if completion.finish_reason in ("error", "abort"):
        error = (
            completion.error or f"generation ended with finish_reason={completion.finish_reason}"
        )
    return Outcome(
        job.key,
        text=completion.text,
        prompt_tokens=len(out.prompt_token_ids),
        completion_tokens=len(completion.token_ids),
        finish_reason=completion.finish_reason,
        error=error,
        warnings=warnings,
    )
