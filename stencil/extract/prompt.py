"""The extraction prompt: a template (system + instructions + schema + document) rendered into
chat messages, with the document cut to fit the context window.

Template files (``--prompt-template FILE``) are plain text with the placeholders ``{schema}``,
``{fields}`` (the schema's top-level properties, one line each with type and description),
``{document}`` (required), ``{instructions}`` and ``{filename}``. A line holding only ``---``
splits the system message (above) from the user message (below); without it the whole text is
the user message. Placeholders are replaced once, so braces inside documents are safe.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

# the fields with their descriptions, the document, then the fields again: of the variants
# measured by bench/extract/extract_quality.py (schema JSON in the system prompt, a field list there, a
# worked example, the document first) the one the embedded 135M model reads best, on the
# benchmark's payments and on the README's invoice (docs/extraction.md)
DEFAULT_TEMPLATE = """\
You extract data from documents. Copy values exactly as written in the document.
---
Fields to extract:
{fields}

Document ({filename}):
{document}

Reply with one JSON object with these fields:
{fields}
{instructions}"""

_PLACEHOLDER = re.compile(r"\{(schema|fields|document|instructions|filename)\}")
_SEPARATOR = re.compile(r"^---[ \t]*$", re.MULTILINE)
SAFETY_TOKENS = 16


class TemplateError(ValueError):
    """A prompt template that cannot be used (a usage error: exit code 2)."""


class TokenCounter(Protocol):
    """How long a text is for the model, and how to cut it to a token count."""

    def count(self, text: str) -> int: ...

    def cut(self, text: str, tokens: int) -> str: ...


@dataclass(frozen=True, slots=True)
class PromptTemplate:
    system: str | None
    user: str

    @classmethod
    def parse(cls, text: str) -> PromptTemplate:
        if "{document}" not in text:
            raise TemplateError("the prompt template must contain the {document} placeholder")
        parts = _SEPARATOR.split(text, maxsplit=1)
        if len(parts) == 1:
            return cls(None, text.strip())
        if "{document}" not in parts[1]:
            raise TemplateError("{document} must be in the user part (below the --- line)")
        return cls(parts[0].strip() or None, parts[1].strip())

    @classmethod
    def load(cls, path: str | None) -> PromptTemplate:
        if path is None:
            return cls.parse(DEFAULT_TEMPLATE)
        try:
            return cls.parse(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as e:
            raise TemplateError(f"cannot read prompt template {path!r}: {e}") from e

    def messages(self, values: dict[str, str]) -> list[dict[str, str]]:
        def fill(text: str) -> str:
            return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), ""), text)

        out = [{"role": "system", "content": fill(self.system)}] if self.system else []
        return [*out, {"role": "user", "content": fill(self.user)}]


@dataclass(slots=True)
class Prompt:
    messages: list[dict[str, str]]
    warnings: list[str]
    document: str
    """The document text as the model sees it (cut to fit the context window)."""


@dataclass(frozen=True, slots=True)
class PromptBuilder:
    """Renders one document's messages so that prompt + max_tokens fit ``context`` tokens.

    ``measure(messages)`` gives the token length of the whole rendered chat prompt.
    """

    template: PromptTemplate
    schema: dict[str, Any]
    instructions: str
    max_tokens: int
    context: int | None
    counter: TokenCounter
    measure: Callable[[list[dict[str, str]]], int]
    reserve: int = 0
    """Tokens kept free besides max_tokens (a field question appended to the prompt)."""

    def build(self, filename: str, document: str) -> Prompt:
        """Messages for one document (cut to fit: ``windows`` splits a long one first so that
        each window fits); ValueError when not even an empty document fits."""
        values = self._values(filename, document)
        budget = self.document_budget(filename)
        if budget is None:
            return Prompt(self.template.messages(values), [], document)
        total = self.counter.count(document)
        if total <= budget:
            return Prompt(self.template.messages(values), [], document)
        values["document"] = self.counter.cut(document, budget)
        warning = (
            f"document cut to {budget} of {total} tokens to fit the context window "
            f"({self.context} tokens with max_tokens={self.max_tokens})"
        )
        return Prompt(self.template.messages(values), [warning], values["document"])

    def document_budget(self, filename: str) -> int | None:
        """The most document tokens one prompt holds (None: no context limit); ValueError
        when not even an empty document fits."""
        if self.context is None:
            return None
        room = self.context - self.max_tokens - SAFETY_TOKENS - self.reserve
        overhead = self.measure(self.template.messages(self._values(filename, "")))
        if room - overhead <= 0:
            raise ValueError(
                f"the prompt template and schema ({overhead} tokens) plus max_tokens "
                f"({self.max_tokens}) leave no room for the document in {self.context} tokens"
            )
        return room - overhead

    def _values(self, filename: str, document: str) -> dict[str, str]:
        return {
            "schema": json.dumps(self.schema, ensure_ascii=False),
            "fields": field_list(self.schema),
            "instructions": f"{self.instructions.strip()}\n" if self.instructions.strip() else "",
            "filename": document_name(filename),
            "document": document,
        }


def document_name(path: str) -> str:
    """How a prompt names a document: its file's name, not its path, so the answers depend
    neither on where the files lie nor on what their folders are called."""
    return re.split(r"[/\\]", path)[-1] or path


def plain_prompt(messages: list[dict[str, str]]) -> str:
    """The messages as one completion prompt, for a base model (no chat template): their texts
    one after another, then where the answer starts."""
    return "\n\n".join(m["content"].strip() for m in messages) + "\n\nAnswer:"


def chat_prompt(tokenizer: Any, messages: list[dict[str, str]]) -> str:
    """The prompt text for ``messages``: the tokenizer's chat template, or ``plain_prompt`` for
    a base model without one (its special tokens, such as BOS, come from tokenizing it)."""
    if not getattr(tokenizer, "chat_template", None):
        return plain_prompt(messages)
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def prompt_ids(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """The token ids of ``chat_prompt`` (a plain prompt with the tokenizer's special tokens)."""
    plain = not getattr(tokenizer, "chat_template", None)
    text = chat_prompt(tokenizer, messages)
    return tokenizer(text, add_special_tokens=plain).input_ids


def record_line(schema: dict[str, Any]) -> str:
    """``Record: Title: description`` and a line end, from the schema's own ``title`` and
    ``description`` (what the user says one record is); empty where it has neither."""
    said = [str(schema[k]) for k in ("title", "description") if schema.get(k)]
    return f"Record: {': '.join(said)}\n" if said else ""


def field_list(schema: dict[str, Any]) -> str:
    """``- key (type, required): description`` for each top-level property of ``schema``."""
    required = set(schema.get("required", ()))
    lines = []
    for key, sub in schema.get("properties", {}).items():
        sub = sub if isinstance(sub, dict) else {}
        kind = sub.get("type", "value")
        kind = "/".join(kind) if isinstance(kind, list) else str(kind)
        items = sub.get("items") if isinstance(sub.get("items"), dict) else {}
        if kind == "array" and items.get("properties"):
            kind = f"array of objects with {', '.join(items['properties'])}"
        tags = [kind, *(["required"] if key in required else [])]
        text = f"- {key} ({', '.join(tags)})"
        lines.append(f"{text}: {sub['description']}" if sub.get("description") else text)
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class HFTokenCounter:
    """Exact counts with the model's own tokenizer."""

    tokenizer: Any

    def count(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False).input_ids)

    def cut(self, text: str, tokens: int) -> str:
        ids = self.tokenizer(text, add_special_tokens=False).input_ids[:tokens]
        return self.tokenizer.decode(ids)


@dataclass(frozen=True, slots=True)
class CharTokenCounter:
    """An estimate for remote servers whose tokenizer is unknown (``chars_per_token`` is low on
    purpose: cutting a little too much beats a request the server rejects)."""

    chars_per_token: float = 3.0

    def count(self, text: str) -> int:
        return int(len(text) / self.chars_per_token) + 1

    def cut(self, text: str, tokens: int) -> str:
        return text[: int(tokens * self.chars_per_token)]
