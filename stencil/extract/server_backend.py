"""The ``--server URL`` backend: the same extraction against any OpenAI-compatible server
(``stencil serve``, vLLM, OpenAI) through ``response_format`` json_schema, ``concurrency``
documents in flight (field by field: each document's first question alone, so the server's
prefix cache holds the document, then the rest at once).

The server's tokenizer is unknown here, so documents are cut by a character estimate, and only
when the server says its context length (``max_model_len`` on ``/v1/models``, as Stencil and
vLLM do).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from stencil.extract import questions, reading
from stencil.extract.engine_backend import ExtractSpec
from stencil.extract.odds import api_tokens, reread
from stencil.extract.prompt import CharTokenCounter, Prompt, PromptBuilder
from stencil.extract.questions import FieldQuestion
from stencil.extract.records import Job, Outcome
from stencil.extract.span_ends import TOP_LOGPROBS, has_cut_strings

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
        self._counting = threading.Lock()
        self._logprobs = True
        """Whether to ask logprobs for cuttable questions (False once the server refused them)."""
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
        self.name = _NAME.sub("_", str(spec.schema.get("title") or "extraction"))[:64]

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

    def _constraint(self, document: str, schema: dict) -> dict[str, Any]:
        """The request's constraint for ``schema`` (a field question's, or the record's):
        ``response_format``, or with grounding Stencil's ``structured_outputs`` extension
        carrying the document as the source text."""
        if not self.spec.per_document:
            name = "field" if self.spec.per_field else self.name
            answer = {"name": name, "schema": schema, "strict": True}
            return {"response_format": {"type": "json_schema", "json_schema": answer}}
        grounded = {
            "json": schema,
            "source_text": document,
            "ground_strings": self.spec.grounded,
            "ground_numbers": self.spec.ground_numbers,
            "ground_dates": self.spec.ground_dates,
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
        """One document: its windows one after another (``reading``), one Outcome."""
        from openai import OpenAIError

        counts: dict[str, Any] = {
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "finish_reason": "stop",
            "warnings": [],
        }
        try:
            windows = reading.read_windows(self.builder, self.spec.schema, job.path, job.text)
            counts["warnings"] = windows.warnings
            parts = []
            for window in windows.windows:
                schema = windows.schema_for(window)
                prompt = self.builder.build(job.path, window.text)
                parts.append((window, schema, self._answers(job, prompt, schema, counts)))
        except (OpenAIError, ValueError) as e:
            return Outcome(job.key, error=f"{type(e).__name__}: {e}"[:500], **counts)
        return self.spec.outcome(job.key, parts, counts)

    def _answers(
        self, job: Job, prompt: Prompt, schema: dict, counts: dict[str, Any]
    ) -> dict[str, str]:
        """One window's answers: field -> answer text (the first question alone, then the rest
        at once), or the whole record's answer."""
        text = prompt.document
        if not self.spec.per_field:
            return {"": self._ask(prompt.messages, text, schema, counts)}
        prefix = self.spec.field_prefix(prompt.messages, job.path, text)
        asked = questions.field_questions(schema)

        def ask(q: FieldQuestion) -> str:
            messages = questions.field_messages(prefix, q)
            return self._ask(messages, text, q.schema, counts, q.frequency_penalty, q.key)

        if not asked:
            return {}
        first, *rest = asked
        answers = {first.key: ask(first)}  # it leaves the document in the prefix cache
        with ThreadPoolExecutor(thread_name_prefix="extract-field") as pool:
            answers.update(zip([q.key for q in rest], pool.map(ask, rest), strict=True))
        return answers

    def _ask(
        self,
        messages: list[dict],
        document: str,
        schema: dict,
        counts: dict,
        penalty: float = 0.0,
        key: str | None = None,
    ) -> str:
        """One request's answer text (``schema``: the record's or field ``key``'s question's);
        its tokens and finish reason added to ``counts``. A field question with strings to cut
        (``span_ends.has_cut_strings``) asks the top logprobs and its answer is reread by them
        as the engine backend does (``odds.reread``); a server that refuses logprobs or returns
        none leaves the answer as it is."""
        from openai import BadRequestError

        request: dict[str, Any] = dict(
            model=self.model,
            messages=messages,
            max_tokens=self.spec.max_tokens,
            temperature=self.spec.temperature,
            frequency_penalty=penalty,
            **self._constraint(document, schema),
        )
        weigh = key is not None and self._logprobs and has_cut_strings(schema)
        try:
            if weigh:
                request.update(logprobs=True, top_logprobs=TOP_LOGPROBS)
            response = self.client.chat.completions.create(**request)
        except BadRequestError:
            if not weigh:
                raise
            del request["logprobs"], request["top_logprobs"]
            response = self.client.chat.completions.create(**request)  # its error is its own
            self._logprobs = weigh = False  # the server refuses logprobs: not asked again
        choice = response.choices[0]
        with self._counting:  # a document's questions may answer at once
            if response.usage:
                counts["prompt_tokens"] += response.usage.prompt_tokens
                counts["completion_tokens"] += response.usage.completion_tokens
            if choice.finish_reason != "stop":
                counts["finish_reason"] = choice.finish_reason
        text = choice.message.content or ""
        if weigh and key is not None and choice.finish_reason == "stop" and choice.logprobs:
            tokens = api_tokens(text, choice.logprobs.content)
            if tokens is not None:
                text = reread(key, schema, text, *tokens)
        return text
