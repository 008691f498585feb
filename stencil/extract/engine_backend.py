"""The in-process backend of ``stencil extract``: every job through one engine as one continuous
batch, outcomes streamed back as each request finishes (so results are written as they come).

Also what each Ray worker actor runs (``stencil.extract.ray_backend``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from stencil.constraints import Constraint, ConstraintError, DocumentIndex, uses_grounding
from stencil.engine.errors import RequestError
from stencil.engine.sampling_params import SamplingParams
from stencil.extract import questions, reading
from stencil.extract.document_proposer import DocumentProposer
from stencil.extract.merge import Grounding
from stencil.extract.odds import reread, weighed_answer
from stencil.extract.prompt import (
    SAFETY_TOKENS,
    HFTokenCounter,
    PromptBuilder,
    PromptTemplate,
    prompt_ids,
    record_line,
)
from stencil.extract.records import Job, Outcome
from stencil.extract.span_ends import TOP_LOGPROBS, has_cut_strings
from stencil.extract.windows import Window


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
    per_field: bool = True
    """One short question per top-level field over the shared document prefix
    (``questions``), then one record from the answers; False: one request answers the whole
    record. A custom prompt template is the prefix its questions follow."""

    def constraint(self, document: str | None = None, schema: dict | None = None) -> Constraint:
        """The constraint for one document (``None``: the document-independent check) and
        ``schema`` (default: the whole record's), in the default bounded whitespace: the model
        spaces its JSON its own way (held to compact JSON, Qwen2.5 picks other values)."""
        schema = self.schema if schema is None else schema
        if document is None:
            document = "x" if self.per_document else None
        if document is None:
            return Constraint.json_schema(schema)
        return Constraint.json_schema(
            schema,
            source_text=document,
            ground_strings=self.grounded,
            ground_numbers=self.ground_numbers,
            ground_dates=self.ground_dates,
        )

    def field_prefix(self, prompt: list[dict], filename: str, document: str) -> list[dict]:
        """The chat every field question of one document starts with (``prompt``: the
        template rendered for it)."""
        default = self.template == PromptTemplate.load(None)
        return questions.field_prefix(prompt, default, self.schema, filename, document)

    def question_reserve(self, counter: Any) -> int:
        """Prompt tokens a field question takes beyond the rendered template, its prefix's
        record line counted too (0: one request per document)."""
        if not self.per_field:
            return 0
        asked = record_line(self.schema) + questions.longest_question(self.schema)
        return counter.count(asked) + SAFETY_TOKENS

    @property
    def grounding(self) -> Grounding:
        return Grounding(self.grounded, self.ground_numbers, self.ground_dates)

    def outcome(self, key: int, parts: list[tuple], counts: dict[str, Any]) -> Outcome:
        """One document's Outcome from its windows' answers (``reading.outcome``)."""
        return reading.outcome(key, self.schema, self.per_field, self.grounding, parts, counts)

    @property
    def per_document(self) -> bool:
        """Whether each document gets its own constraint (grounding)."""
        per_document = self.grounded or self.ground_numbers or self.ground_dates
        return per_document or uses_grounding(self.schema)


class EngineExtractor:
    """Runs jobs through ``llm`` (a ``stencil.LLM``) under the schema constraint: one request per
    document, or one per field (``ExtractSpec.per_field``) whose answers make one record."""

    def __init__(self, llm: Any, spec: ExtractSpec, window: int | None = None) -> None:
        self.llm = llm
        self.engine = llm.engine
        self.spec = spec
        self.per_field = spec.per_field
        counter = HFTokenCounter(llm.get_tokenizer())
        self.builder = PromptBuilder(
            spec.template,
            spec.schema,
            spec.instructions,
            spec.max_tokens,
            self.engine.max_model_len,
            counter,
            lambda messages: len(self._prompt_ids(messages)),
            spec.question_reserve(counter),
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
        return prompt_ids(self.engine.tokenizer, messages)

    def run(self, jobs: Iterable[Job]) -> Iterator[Outcome]:
        """Yield one Outcome per job, in completion order; at most ``window`` documents in the
        engine. A window's first question goes in alone; once its prompt is computed (its first
        token out) the window's blocks are in the prefix cache, and its other questions go in
        at once, beside the others in the batch."""
        pending = iter(jobs)
        inflight: dict[str, tuple[_Doc, _Part]] = {}  # request id in the engine -> its window
        docs = 0
        exhausted = False
        try:
            while True:
                while not exhausted and docs < self.window:
                    job = next(pending, None)
                    if job is None:
                        exhausted = True
                    elif (done := self._start(job, inflight)) is not None:
                        yield done
                    else:
                        docs += 1
                if not inflight:
                    return
                for out in self.engine.step():
                    if (held := inflight.get(out.request_id)) is None:
                        continue
                    doc, part = held
                    if out.finished:
                        del inflight[out.request_id]
                        doc.finish(part, out, self.engine.tokenizer.decode)
                    elif part.primed:
                        continue
                    part.primed = True
                    if (done := self._advance(doc, part, inflight)) is not None:
                        docs -= 1
                        yield done
        finally:
            for rid in inflight:
                self.engine.abort_request(rid)

    def _start(self, job: Job, inflight: dict[str, tuple[_Doc, _Part]]) -> Outcome | None:
        """Queue the first request of each window of one job; an Outcome when there is none."""
        try:
            windows = reading.read_windows(self.builder, self.spec.schema, job.path, job.text)
        except ValueError as e:
            return Outcome(job.key, error=str(e))
        doc = _Doc(job, self.spec, windows.warnings)
        for i, window in enumerate(windows.windows):
            schema = windows.schema_for(window)
            prompt = self.builder.build(job.path, window.text)
            rid = f"extract-{job.key}:{i}"
            part = _Part(window, schema, DocumentIndex(window.text))
            if self.per_field:
                part.queue = self._field_requests(rid, job.path, part, prompt.messages)
            else:
                part.queue = [(rid, self._prompt_ids(prompt.messages), schema, 0.0)]
            doc.parts.append(part)
        done = None
        for part in list(doc.parts):
            done = self._advance(doc, part, inflight) or done
        return done

    def _advance(
        self, doc: _Doc, part: _Part, inflight: dict[str, tuple[_Doc, _Part]]
    ) -> Outcome | None:
        """Queue the window's requests that can go now; the document's Outcome when none of
        its windows has a request left."""
        if doc.error is None:
            try:
                for rid, ids, schema, penalty in part.ready():
                    params = replace(self.params, frequency_penalty=penalty, proposer=part.proposer)
                    if self.per_field and has_cut_strings(schema):
                        params = replace(params, logprobs=TOP_LOGPROBS)
                    elif self.per_field and weighed_answer(schema):
                        params = replace(params, logprobs=0, logprobs_mode="raw_logprobs")
                    part.schemas[rid] = schema
                    if self.spec.per_document:
                        constraint = self.spec.constraint(part.window.text, schema)
                        params = replace(params, constraint=constraint)
                    self.engine.add_request(rid, ids, params)
                    inflight[rid] = (doc, part)
                    part.flying += 1
            except (ValueError, RequestError, ConstraintError) as e:
                doc.error = str(e)
        if part.flying and doc.error is None:
            return None
        part.done = True
        if any(not p.done for p in doc.parts) or any(d is doc for d, _ in inflight.values()):
            return None
        return doc.outcome()

    def _field_requests(
        self, rid: str, filename: str, part: _Part, prompt: list[dict]
    ) -> list[tuple]:
        """The window's questions (``questions.field_questions``): (request id, prompt ids,
        answer schema, frequency penalty) each."""
        prefix = self.spec.field_prefix(prompt, filename, part.window.text)
        return [
            (
                f"{rid}:{q.key}",
                self._prompt_ids(questions.field_messages(prefix, q)),
                q.schema,
                q.frequency_penalty,
            )
            for q in questions.field_questions(part.schema)
        ]


@dataclass(slots=True)
class _Part:
    """One window of a document in flight: its requests still to come, its answers so far."""

    window: Window
    schema: dict[str, Any]
    """The window's schema (``merge.window_schema``, narrowed to what it states)."""
    index: DocumentIndex
    """What the window states: its requests' drafts read it (``DocumentProposer``)."""
    queue: list[tuple] = field(default_factory=list)
    """Requests not sent yet: all but the first until the window is primed."""
    answers: dict[str, str] = field(default_factory=dict)
    schemas: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Each request's answer schema, by request id."""
    flying: int = 0
    primed: bool = False
    """Whether the window's prompt is computed (a request of it has written a token)."""
    done: bool = False
    proposer: DocumentProposer = field(init=False)
    """Drafts from the window for speculative decoding, lent on each of its requests."""

    def __post_init__(self) -> None:
        self.proposer = DocumentProposer(self.index)

    def ready(self) -> list[tuple]:
        """The requests to send now: the first alone (it leaves the window's prompt in the
        prefix cache), then the rest."""
        if self.flying and not self.primed:
            return []
        n = len(self.queue) if self.primed else 1
        out, self.queue = self.queue[:n], self.queue[n:]
        return out


@dataclass(slots=True)
class _Doc:
    """One document in flight: its windows, and the tokens and errors so far."""

    job: Job
    spec: ExtractSpec
    warnings: list[str]
    parts: list[_Part] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = "stop"
    error: str | None = None

    def finish(self, part: _Part, out: Any, decode: Any) -> None:
        """Take one finished request's answer, reread where the model's odds say so: a string
        closed at a separator (``span_ends``), a number it did not want left out (``odds``)."""
        completion = out.outputs[0]
        key = out.request_id.rpartition(":")[2]
        schema = part.schemas.pop(out.request_id, {})
        text = completion.text
        if completion.finish_reason == "stop":
            text = reread(key, schema, text, completion.token_ids, completion.logprobs, decode)
        part.answers[key] = text
        part.flying -= 1
        self.prompt_tokens += len(out.prompt_token_ids)
        self.completion_tokens += len(completion.token_ids)
        if completion.finish_reason != "stop":
            self.finish_reason = completion.finish_reason
        if completion.finish_reason in ("error", "abort") and self.error is None:
            self.error = (
                completion.error
                or f"generation ended with finish_reason={completion.finish_reason}"
            )

    def outcome(self) -> Outcome:
        counts = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "finish_reason": self.finish_reason,
            "warnings": self.warnings,
        }
        if self.error is not None:
            return Outcome(self.job.key, error=self.error, **counts)
        parts = [(p.window, p.schema, p.answers) for p in self.parts]
        return self.spec.outcome(self.job.key, parts, counts)
