"""The in-process backend of ``stencil extract``: every job through one engine as one continuous
batch, outcomes streamed back as each request finishes (so results are written as they come).

Also what each Ray worker actor runs (``stencil.extract.ray_backend``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from stencil.constraints import Constraint, ConstraintError, uses_grounding
from stencil.engine.errors import RequestError
from stencil.engine.sampling_params import SamplingParams
from stencil.extract import questions
from stencil.extract.field_plan import FieldPlan
from stencil.extract.prompt import SAFETY_TOKENS, HFTokenCounter, PromptBuilder, PromptTemplate
from stencil.extract.records import Job, Outcome
from stencil.extract.regions import check_record


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
    """One short question per top-level field over the shared document prefix (``questions``,
    ``field_plan``), then one record from the answers; False: one request answers the whole
    record. A custom prompt template is the prefix its questions follow."""

    def constraint(self, document: str | None = None, schema: dict | None = None) -> Constraint:
        """The constraint for one document (``None``: the document-independent check) and
        ``schema`` (default: the whole record's)."""
        schema = self.schema if schema is None else schema
        if document is None:
            document = "x" if self.per_document else None
        if document is None:
            return Constraint.json_schema(schema, whitespace="compact")
        return Constraint.json_schema(
            schema,
            whitespace="compact",
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
        """Prompt tokens a field question takes beyond the rendered template (0: one request
        per document)."""
        if not self.per_field:
            return 0
        return counter.count(questions.longest_question(self.schema)) + SAFETY_TOKENS

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
        tok = self.engine.tokenizer
        text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return tok(text, add_special_tokens=False).input_ids

    def run(self, jobs: Iterable[Job]) -> Iterator[Outcome]:
        """Yield one Outcome per job, in completion order; at most ``window`` documents in the
        engine, each with one request at a time (a field's question goes in when the one before
        it has its answer, and finds the document's blocks in the prefix cache)."""
        pending = iter(jobs)
        docs: dict[str, _Doc] = {}  # request id in the engine -> its document
        exhausted = False
        try:
            while True:
                while not exhausted and len(docs) < self.window:
                    job = next(pending, None)
                    if job is None:
                        exhausted = True
                    elif (done := self._start(job, docs)) is not None:
                        yield done
                if not docs:
                    return
                for out in self.engine.step():
                    if out.finished and (doc := docs.pop(out.request_id, None)) is not None:
                        doc.finish(out)
                        if (done := self._advance(doc, docs)) is not None:
                            yield done
        finally:
            for rid in docs:
                self.engine.abort_request(rid)

    def _start(self, job: Job, docs: dict[str, _Doc]) -> Outcome | None:
        """Queue one job's first request; an Outcome when there is none to run."""
        rid = f"extract-{job.key}"
        try:
            prompt = self.builder.build(job.path, job.text)
        except ValueError as e:
            return Outcome(job.key, error=str(e))
        schema = questions.narrow_schema(self.spec.schema, prompt.document)
        doc = _Doc(job, prompt.document, prompt.warnings, self.per_field)
        if self.per_field:
            doc.parts = self._field_parts(rid, job.path, schema, doc, prompt.messages)
        else:
            doc.parts = iter([(rid, self._prompt_ids(prompt.messages), schema)])
        return self._advance(doc, docs)

    def _advance(self, doc: _Doc, docs: dict[str, _Doc]) -> Outcome | None:
        """Queue the document's next request; its Outcome when it has no more."""
        if doc.error is None:
            try:
                part = next(doc.parts, None)
                if part is not None:
                    rid, ids, schema = part
                    params = self.params
                    if self.spec.per_document:
                        constraint = self.spec.constraint(doc.document, schema)
                        params = replace(params, constraint=constraint)
                    self.engine.add_request(rid, ids, params)
                    docs[rid] = doc
                    return None
            except (ValueError, RequestError, ConstraintError) as e:
                doc.error = str(e)
        return doc.outcome(self.spec.schema)

    def _field_parts(
        self, rid: str, filename: str, schema: dict, doc: _Doc, prompt: list[dict]
    ) -> Iterator[tuple]:
        """One question per field, (request id, prompt ids, answer schema), each narrowed to
        what the document states for it and the answers before it left (``field_plan``)."""
        prefix = self.spec.field_prefix(prompt, filename, doc.document)
        plan = FieldPlan(schema, doc.document, self.spec.ground_numbers, self.spec.ground_dates)
        for q in plan.questions(doc.answers):
            messages = questions.field_messages(prefix, q)
            yield f"{rid}:{q.key}", self._prompt_ids(messages), q.schema


@dataclass(slots=True)
class _Doc:
    """One document in flight: its requests still to come, and the answers so far."""

    job: Job
    document: str
    warnings: list[str]
    per_field: bool
    parts: Iterator[tuple] = field(default_factory=lambda: iter(()))
    answers: dict[str, str] = field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = "stop"
    error: str | None = None

    def finish(self, out: Any) -> None:
        """Take one finished request's answer."""
        completion = out.outputs[0]
        self.answers[out.request_id.rpartition(":")[2]] = completion.text
        self.prompt_tokens += len(out.prompt_token_ids)
        self.completion_tokens += len(completion.token_ids)
        if completion.finish_reason != "stop":
            self.finish_reason = completion.finish_reason
        if completion.finish_reason in ("error", "abort") and self.error is None:
            self.error = (
                completion.error
                or f"generation ended with finish_reason={completion.finish_reason}"
            )

    def outcome(self, schema: dict[str, Any]) -> Outcome:
        if self.error is not None:
            return Outcome(self.job.key, error=self.error, warnings=self.warnings,
                           prompt_tokens=self.prompt_tokens,
                           completion_tokens=self.completion_tokens,
                           finish_reason=self.finish_reason)  # fmt: skip
        if self.per_field:
            data = questions.assemble(schema, self.answers)
        else:
            data = _loads(next(iter(self.answers.values()), ""))
        text = next(iter(self.answers.values()), "{}")
        if isinstance(data, dict):
            text = json.dumps(check_record(schema, data, self.document), ensure_ascii=False)
        return Outcome(
            self.job.key,
            text=text,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            finish_reason=self.finish_reason,
            warnings=self.warnings,
        )


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None
