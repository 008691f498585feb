"""Field-by-field extraction: one short constrained question per top-level field of the schema,
each over the same document prefix (so the engine's prefix cache computes the document once),
then one record assembled from the answers.

A question's answer is a one-key JSON object, ``{"total":1190.0}``, under the field's own schema
(grounded like the whole record would be); an optional field may be answered ``{}``. Fields the
document cannot fill are not asked: a free number, date or currency field when the document
states no number, date or currency. A currency field (a three-letter code) only takes the
currencies the document states by code or sign (``stated.currencies_in``).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from stencil.constraints import currencies_in, dates_in, numbers_in
from stencil.extract.prompt import field_list

SYSTEM = "You extract data from documents. Copy values exactly as written in the document."
# the document first (shared by every question), then the one field asked
USER = "Fields to extract:\n{fields}\n\nDocument ({filename}):\n{document}\n\n"
QUESTION = 'Field: {key} ({kind}{required}){description}\nReply with JSON: {{"{key}": value}}'
CURRENCY_PATTERN = "^[A-Z]{3}$"


@dataclass(frozen=True, slots=True)
class FieldQuestion:
    key: str
    schema: dict[str, Any]
    """The answer's schema: an object with just this field."""
    text: str
    """The question, appended to the document prefix."""


def field_prefix(
    prompt: list[dict[str, str]],
    default: bool,
    schema: dict[str, Any],
    filename: str,
    document: str,
) -> list[dict[str, str]]:
    """The chat every question of one document starts with: the default template's short
    form (system line, field list, document), or a custom template's rendered ``prompt``."""
    if not default:
        return prompt
    head = USER.format(fields=field_list(schema), filename=filename, document=document)
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": head}]


def field_messages(prefix: list[dict[str, str]], q: FieldQuestion) -> list[dict[str, str]]:
    """``prefix`` with the question after its last message (the shared part stays a prefix)."""
    *rest, last = prefix
    sep = "" if last["content"].endswith("\n\n") else "\n\n"
    return [*rest, {**last, "content": last["content"] + sep + q.text}]


def longest_question(schema: dict[str, Any]) -> str:
    """The longest question text the schema's fields can ask (for the prompt's budget)."""
    required = set(schema.get("required", ()))
    texts = [_question(k, v, k in required) for k, v in schema.get("properties", {}).items()
             if isinstance(v, dict)]  # fmt: skip
    return max(texts, key=len, default="")


def narrow_schema(schema: dict[str, Any], document: str) -> dict[str, Any]:
    """The schema for one document: currency fields narrowed to the currencies it states, and
    optional fields it has no value for (no number, date or currency stated) left out."""
    required = set(schema.get("required", ()))
    props = {}
    for key, sub in schema.get("properties", {}).items():
        narrowed = _narrowed(key, sub, document) if isinstance(sub, dict) else sub
        if narrowed is not None or key in required:
            props[key] = sub if narrowed is None else narrowed
    return {**schema, "properties": props}


def field_question(key: str, sub: dict[str, Any], required: bool) -> FieldQuestion:
    """The question for one field (``sub``: its schema for this document)."""
    answer = {"type": "object", "properties": {key: sub}, "additionalProperties": False}
    if required:
        answer["required"] = [key]
    return FieldQuestion(key, answer, _question(key, sub, required))


def is_currency(key: str, sub: dict[str, Any]) -> bool:
    """A three-letter currency code field (by its pattern and its name or description)."""
    named = "currency" in key.lower() or "currency" in str(sub.get("description", "")).lower()
    return named and sub.get("type") == "string" and sub.get("pattern") in (CURRENCY_PATTERN, None)


def _narrowed(key: str, sub: dict[str, Any], document: str) -> dict[str, Any] | None:
    """The field's schema for this document, or None when the document has no value for it."""
    if "enum" in sub or "const" in sub:
        return sub
    if is_currency(key, sub):
        codes = currencies_in(document)
        return (
            {**{k: v for k, v in sub.items() if k != "pattern"}, "enum": codes} if codes else None
        )
    if sub.get("type") in ("number", "integer") and not numbers_in(document):
        return None
    if sub.get("format") == "date" and dates_in(document) == []:
        return None
    return sub


def _question(key: str, sub: dict[str, Any], required: bool) -> str:
    kind = sub.get("type", "value")
    items = sub.get("items") if isinstance(sub.get("items"), dict) else {}
    if kind == "array" and items.get("properties"):
        kind = f"list of {', '.join(items['properties'])}"
    if sub.get("format") == "date":
        kind = "date"
    description = f": {sub['description']}" if sub.get("description") else ""
    return QUESTION.format(key=key, kind=kind, required=", required" if required else "",
                           description=description)  # fmt: skip


def assemble(schema: dict[str, Any], answers: dict[str, str]) -> dict[str, Any]:
    """One record from the answers (field -> raw answer text); unreadable answers are left out."""
    data: dict[str, Any] = {}
    for key in schema.get("properties", {}):
        text = answers.get(key)
        try:
            value = json.loads(text) if text else {}
        except ValueError:
            continue
        if isinstance(value, dict) and key in value:
            data[key] = copy.deepcopy(value[key])
    return data
