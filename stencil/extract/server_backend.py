"""The ``--server URL`` backend: the same extraction against any OpenAI-compatible server
(``stencil serve``, vLLM, OpenAI) through ``response_format`` json_schema, ``concurrency``
documents in flight (field by field: each document's questions one after another, so the
server's prefix cache holds the document for the next one).

The server's tokenizer is unknown here, so documents are cut by a character estimate, and only
when the server says its context length (``max_model_len`` on ``/v1/models``, as Stencil and
vLLM do).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from stencil.extract import questions
from stencil.extract.engine_backend import ExtractSpec
from stencil.extract.field_plan import FieldPlan
from stencil.extract.prompt import CharTokenCounter, Prompt, PromptBuilder
from stencil.extract.records import Job, Outcome
from stencil.extract.regions import check_record

_NAME = re.compile(r"[^a-zA-Z0-9_-]")
_CHAT_OVERHEAD_TOKENS = 32


class ServerUnavailable(ConnectionError):
    """The server cannot be reached or refuses the key (exit code 2, nothing recorded)."""


class ServerExtractor:
    def __init__(
        self, url: str, spec: ExtractSpec, model: str | None, concurrency: int, timeout: float
    ) -> None:
        from openai import OpenAI

        self.client = OpenAI(
            base_url=url.rstrip("/") + ("" if url.rstrip("/").endswith("/v1") else "/v1"),
            api_key=os.environ.get("OPENAI_API_KEY", "none"),
            timeout=timeout,
            max_retries=2,
        )
        self.spec = spec
        self.concurrency = max(1, concurrency)
        card = self._model_card(model)
        self.model = model or card.get("id") or "default"
        counter = CharTokenCounter()
        self.builder = PromptBuilder(
            spec.template,
            spec.schema,
            spec.instructions,
            spec.max_tokens,
            card.get("max_model_len"),
            counter,
            lambda messages: (
                sum(counter.count(m["content"]) for m in messages) + _CHAT_OVERHEAD_TOKENS
            ),
            spec.question_reserve(counter),
        )
        name = _NAME.sub("_", str(spec.schema.get("title") or "extraction"))[:64]
        self.response_format = {
            "type": "json_schema",
            "json_schema": {"name": name, "schema": spec.schema, "strict": True},
        }

    def _model_card(self, model: str | None) -> dict[str, Any]:
        """The served model's card (``id``, maybe ``max_model_len``); {} if it cannot be listed.
        An unreachable server is a ServerUnavailable before any file gets a record."""
        from openai import APIConnectionError, AuthenticationError, OpenAIError

        try:
            listing = self.client.with_options(max_retries=0).models.list()
            cards = [c.model_dump() for c in listing.data]
        except (APIConnectionError, AuthenticationError) as e:
            raise ServerUnavailable(f"cannot use the server at {self.client.base_url}: {e}") from e
        except OpenAIError:
            return {}
        for card in cards:
            if model is None or card.get("id") == model:
                return card
        return {}

    def _constraint(self, document: str, schema: dict | None = None) -> dict[str, Any]:
        """The request's constraint (``schema``: a field question's, default the record's):
        ``response_format``, or with grounding Stencil's ``structured_outputs`` extension
        carrying the document as the source text."""
        if not self.spec.per_document:
            if schema is None:
                return {"response_format": self.response_format}
            answer = {"name": "field", "schema": schema, "strict": True}
            return {"response_format": {"type": "json_schema", "json_schema": answer}}
        grounded = {
            "json": self.spec.schema if schema is None else schema,
            "source_text": document,
            "ground_strings": self.spec.grounded,
            "ground_numbers": self.spec.ground_numbers,
            "ground_dates": self.spec.ground_dates,
            "disable_any_whitespace": True,
        }
        return {"extra_body": {"structured_outputs": grounded}}

    def run(self, jobs: Iterable[Job]) -> Iterator[Outcome]:
        """Yield one Outcome per job in completion order, ``concurrency`` requests at a time."""
        pending = iter(jobs)
        with ThreadPoolExecutor(self.concurrency, thread_name_prefix="extract") as pool:
            inflight: set[Future[Outcome]] = set()
            try:
                while True:
                    while len(inflight) < self.concurrency:
                        job = next(pending, None)
                        if job is None:
                            break
                        inflight.add(pool.submit(self._one, job))
                    if not inflight:
                        return
                    done, inflight = wait(inflight, return_when=FIRST_COMPLETED)
                    for future in done:
                        yield future.result()
            finally:
                for future in inflight:
                    future.cancel()

    def _one(self, job: Job) -> Outcome:
        from openai import OpenAIError

        try:
            prompt = self.builder.build(job.path, job.text)
            if self.spec.per_field:
                return self._by_field(job, prompt)
            response = self._ask(prompt.messages, prompt.document)
        except (OpenAIError, ValueError) as e:
            return Outcome(job.key, error=f"{type(e).__name__}: {e}"[:500])
        choice = response.choices[0]
        usage = response.usage
        return Outcome(
            job.key,
            text=choice.message.content,
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
            finish_reason=choice.finish_reason,
            warnings=prompt.warnings,
        )

    def _ask(self, messages: list[dict], document: str, schema: dict | None = None) -> Any:
        return self.client.chat.completions.create(
            model=self.model,
            messages=messages,
            max_tokens=self.spec.max_tokens,
            temperature=self.spec.temperature,
            **self._constraint(document, schema),
        )

    def _by_field(self, job: Job, prompt: Prompt) -> Outcome:
        """One request per field question (``field_plan``), one after another; one record."""
        document = prompt.document
        schema = questions.narrow_schema(self.spec.schema, document)
        prefix = self.spec.field_prefix(prompt.messages, job.path, document)
        plan = FieldPlan(schema, document, self.spec.ground_numbers, self.spec.ground_dates)
        answers: dict[str, str] = {}
        tokens, finish = [0, 0], "stop"
        for q in plan.questions(answers):
            response = self._ask(questions.field_messages(prefix, q), document, q.schema)
            choice = response.choices[0]
            answers[q.key] = choice.message.content or ""
            if response.usage:
                tokens[0] += response.usage.prompt_tokens
                tokens[1] += response.usage.completion_tokens
            finish = finish if choice.finish_reason == "stop" else choice.finish_reason
        data = check_record(schema, questions.assemble(schema, answers), document)
        return Outcome(job.key, text=json.dumps(data, ensure_ascii=False),
                       prompt_tokens=tokens[0], completion_tokens=tokens[1],
                       finish_reason=finish, warnings=prompt.warnings)  # fmt: skip
