"""The questions of one document, field by field, each narrowed to what the document states for
that field before it is asked (shared by the engine and server backends).

Order: required fields first, arrays last, else the schema's. Every field is asked, unless
grounding leaves it nothing to copy. Each field's schema is narrowed by ``ValuePool`` (the
numbers and dates the answers before it left: a due date is not the issue date again, a total
not a line amount, unless the document states the value twice); an optional field with none
left is not asked.

The document's labels (``labels.LabelIndex``) assist, never decide: where the document prints a
label of the field's kind (``Total``, ``Gesamtbetrag``, ``Bill to:``, ``Fällig am``, ``Échéance``,
``Rechnung Nr.``), the question quotes the labelled line (``The document labels it: "Total due
£1,896.00"``), and the model answers under the field's grounded schema, free to take another
stated value or none. A field's kind of label is found by its name (``total``, ``invoice_total``,
``totalAmount``, ``amount-due``) or, failing that, by its description (``"the customer billed"``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from stencil.extract.label_words import FIELDS
from stencil.extract.labels import LabelIndex
from stencil.extract.questions import FieldQuestion, field_question
from stencil.extract.value_pool import ValuePool

_MAX_HINTS = 3
_HINT_CHARS = 60


class FieldPlan:
    """One document's questions; ``questions(answers)`` yields the next one after the answer
    to the one before it is in ``answers`` (field -> raw answer text)."""

    def __init__(self, schema: dict[str, Any], document: str, numbers: bool, dates: bool) -> None:
        self.schema = schema
        self.document = document
        self.pool = ValuePool(document, numbers, dates)
        self.labels = LabelIndex(document)

    def questions(self, answers: dict[str, str]) -> Iterator[FieldQuestion]:
        required = set(self.schema.get("required", ()))
        props = self.schema.get("properties", {})
        for key in sorted(props, key=lambda k: (_is_array(props[k]), k not in required)):
            sub = self.pool.narrow(props[key], key in required)
            if sub is None:
                continue
            yield field_question(key, sub, key in required, self.hints(key, sub))
            answer = _loads(answers.get(key, ""))
            if isinstance(answer, dict) and key in answer:
                self.pool.take(answer[key])

    def hints(self, key: str, sub: dict[str, Any]) -> tuple[str, ...]:
        """The document's lines where a label of the field's kind stands, from the label to the
        end of its value (at most ``_MAX_HINTS``)."""
        concepts = concepts_of(key, sub)
        if not concepts or sub.get("type") in ("array", "object", "boolean"):
            return ()
        out = []
        for hit in self.labels.of(concepts)[:_MAX_HINTS]:
            text = " ".join(self.document[hit.start : hit.value[1]].split())
            out.append(text if len(text) <= _HINT_CHARS else text[:_HINT_CHARS].rsplit(" ", 1)[0])
        return tuple(dict.fromkeys(t for t in out if t))


def concepts_of(key: str, sub: dict[str, Any]) -> tuple[str, ...] | None:
    """The label concepts of a field (``label_words.FIELDS``), by its name (whole, then its
    longest run of words, then its last word), else by the first field name its description
    mentions."""
    words = _words(key)
    for n in range(len(words), 0, -1):
        for i in range(len(words) - n, -1, -1):
            found = FIELDS.get("_".join(words[i : i + n]))
            if found is not None:
                return found
    description = " ".join(_words(str(sub.get("description", ""))))
    found = [(m.start(), name) for name in FIELDS
             if (m := re.search(rf"\b{name.replace('_', ' ')}\b", description))]  # fmt: skip
    return FIELDS[min(found)[1]] if found else None


def _words(text: str) -> list[str]:
    """``invoiceTotal``, ``invoice-total``, ``Invoice total`` -> ``["invoice", "total"]``."""
    text = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", text)
    return [w for w in re.split(r"[^0-9a-zà-ÿ]+", text.lower()) if w]


def _is_array(sub: Any) -> bool:
    return isinstance(sub, dict) and sub.get("type") == "array"


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None
