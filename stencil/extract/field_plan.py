"""The questions of one document, field by field, each narrowed to what the document states for
that field before it is asked (shared by the engine and server backends).

Order: required fields first, arrays last, else the schema's. Each field's schema is narrowed
by ``ValuePool`` (numbers and dates the answers before it left), then by the document's labels
(``labels.LabelIndex``):

- a field whose labels the document prints takes only the values after them: a total the number
  after ``Total`` / ``Gesamtbetrag`` / ``Net à payer``, not after ``Subtotal`` or ``MwSt.``; a
  due date the date after ``Due`` / ``Fällig am`` / ``Échéance``; an invoice number the code
  after ``Invoice`` / ``Rechnung Nr.``; a buyer the name after ``Bill to:`` / ``Kunde:``;
- an optional field of a labelled kind (tax, due date, buyer, phone, subject, ...) whose labels
  the document does not print is not asked (left out);
- with no label: a total is the largest amount of money the document states; a seller or sender
  the name its head starts with (the letterhead); another party (a merchant, supplier,
  recipient) one of the names that start its head's blocks, not one an earlier field took;
- an enum field with words for its values (a payment method: cash, Karte, espèces, ...) takes
  only the values the document names; none: an optional one is not asked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from stencil.extract.label_words import ENUM_WORDS, FIELDS, GATED, ISSUERS, PARTIES
from stencil.extract.labels import LabelIndex
from stencil.extract.questions import FieldQuestion, field_question, is_currency
from stencil.extract.value_pool import ValuePool

_PHONE = re.compile(r"\+\d[\d \-/().]{6,}\d")


class FieldPlan:
    """One document's questions; ``questions(answers)`` yields the next one after the answer
    to the one before it is in ``answers`` (field -> raw answer text)."""

    def __init__(self, schema: dict[str, Any], document: str, numbers: bool, dates: bool) -> None:
        self.schema = schema
        self.document = document
        self.pool = ValuePool(document, numbers, dates)
        self.labels = LabelIndex(document)
        self.taken: list[str] = []

    def questions(self, answers: dict[str, str]) -> Iterator[FieldQuestion]:
        required = set(self.schema.get("required", ()))
        props = self.schema.get("properties", {})
        for key in sorted(props, key=lambda k: (_is_array(props[k]), k not in required)):
            sub = self.pool.narrow(props[key], key in required)
            if sub is not None:
                sub = self.narrow(key, sub, key in required)
            if sub is None:
                continue
            yield field_question(key, sub, key in required)
            answer = _loads(answers.get(key, ""))
            if isinstance(answer, dict) and key in answer:
                self.pool.take(answer[key])
                if isinstance(answer[key], str):
                    self.taken.append(answer[key])

    def narrow(self, key: str, sub: dict[str, Any], required: bool) -> dict[str, Any] | None:
        """``sub`` narrowed by the document's labels; None: not asked."""
        chosen = "enum" in sub and sub.get("format") != "date"  # not a pool-narrowed date
        if chosen and sub.get("type") == "string" and not is_currency(key, sub):
            return self._named_values(sub, required)
        concepts = FIELDS.get(key.lower())
        if concepts is None or chosen and sub.get("type") == "string":
            return sub
        hits = self.labels.of(concepts)
        if not hits and concepts[0] in GATED and not required:
            return sub if concepts[0] == "phone" and _PHONE.search(self.document) else None
        if sub.get("type") in ("number", "integer"):
            found = self.labels.numbers(hits) if hits else []
            if not hits and concepts[0] == "total":
                found = self.labels.money()[:1]
            return _within(sub, found, required)
        if sub.get("type") != "string":
            return sub
        if sub.get("format") == "date":
            return _within(sub, self.labels.dates(hits), required)
        if "pattern" in sub:
            return _within(sub, self.labels.codes(hits, sub["pattern"]), required)
        if concepts[0] in PARTIES:
            found = self.labels.names(hits) if hits else self.labels.head_names
            if not hits and key.lower() in ISSUERS:
                found = found[:1]
            return _within(sub, [n for n in found if n not in self.taken], required)
        return _within(sub, self.labels.texts(hits), required)

    def _named_values(self, sub: dict[str, Any], required: bool) -> dict[str, Any] | None:
        """An enum with words for its values: the values whose words the document prints."""
        if not any(v in ENUM_WORDS for v in sub["enum"]):
            return sub
        text = self.document.lower()
        named = [v for v in sub["enum"] if any(
            re.search(rf"(?<!\w){re.escape(w)}(?!\w)", text) for w in ENUM_WORDS.get(v, ()))]  # fmt: skip
        if named:
            return {**sub, "enum": named}
        return sub if required else None


def _within(sub: dict[str, Any], found: list[Any], required: bool) -> dict[str, Any] | None:
    """``sub`` as an enum of the ``found`` values it allows (those the pool left, when it has
    narrowed ``sub``); ``sub`` itself when nothing was found."""
    if not found:
        return sub
    if sub.get("type") == "integer":
        found = [int(v) for v in found if v == int(v)]
    if sub.get("type") == "string":
        low, high = sub.get("minLength", 0), sub.get("maxLength", 10**9)
        found = [v for v in found if low <= len(v) <= high]
    if "enum" in sub:
        found = [v for v in found if v in sub["enum"]]
    if not found:
        return sub if required else None
    keep = {k: v for k, v in sub.items() if k not in ("pattern", "x-grounded", "enum")}
    return {**keep, "enum": found}


def _is_array(sub: Any) -> bool:
    return isinstance(sub, dict) and sub.get("type") == "array"


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None
