"""The questions of one document, field by field, each narrowed to what the document states for
that field before it is asked (shared by the engine and server backends).

Order: required fields first, arrays last, else the schema's. Every field is asked, unless
grounding leaves it nothing to copy. Each field's schema is narrowed by ``ValuePool`` (the
numbers and dates the answers before it left: a due date is not the issue date again, a total
not a line amount, unless the document states the value twice); an optional field with none
left is not asked. Only those fields wait for the answers before them: a field with no free
number or date in it is asked at once, beside the others (``FieldPlan.ready``), and gets the
question it would get after them.

The document's labels (``DocumentIndex.labels``, the lexicon's words) assist, never decide:
where the document prints a label of the field's kind (``Total``, ``Gesamtbetrag``, ``Bill to:``,
``Fällig am``, ``Échéance``, ``Rechnung Nr.``), the question quotes the labelled line (``The
document labels it: "Total due £1,896.00"``), and the model answers under the field's grounded
schema, free to take another stated value or none. A field's kind of label is found by the
lexicon's words in its name (``total``, ``invoice_total``, ``totalAmount``, ``amount-due``,
``billingAddress``) or, failing that, in its description (``"the customer billed"``, ``"who
pays"``: ``Lexicon.concepts_for``); a field of no known kind is quoted where a line names it
before a colon (``Age: 85``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from stencil.constraints import LEXICON, DocumentIndex, claimed_kinds
from stencil.extract.questions import FieldQuestion, field_question
from stencil.extract.spans import key_words
from stencil.extract.value_pool import ValuePool

_MAX_HINTS = 2
_HINT_CHARS = 60


class FieldPlan:
    """One document's questions, handed out by ``ready(answers)`` as they can be asked."""

    def __init__(
        self,
        schema: dict[str, Any],
        document: str,
        numbers: bool,
        dates: bool,
        index: DocumentIndex | None = None,
    ) -> None:
        self.schema = schema
        self.document = document
        self.index = DocumentIndex(document) if index is None else index
        self.pool = ValuePool(self.index, numbers, dates)
        self.required = set(schema.get("required", ()))
        self.props = schema.get("properties", {})
        self.claimed = frozenset(claimed_kinds(self.props))
        self.order = sorted(
            self.props, key=lambda k: (_is_array(self.props[k]), k not in self.required)
        )
        self.asked: set[str] = set()
        self.unasked: set[str] = set()  # left nothing to answer with
        self.settled = 0  # the leading fields in ``order`` whose answers the pool has taken

    def ready(self, answers: dict[str, str]) -> list[FieldQuestion]:
        """The questions that can go now, given the answers so far (field -> raw answer text):
        every field not asked yet that the pool does not narrow, and the next field it does
        once every field before it is answered. Answered in any order, the questions are
        those asked one after another, in ``order``, would get."""
        out = []
        for i, key in enumerate(self.order):
            self._settle(answers)
            if key in self.asked or (self.pool.depends(self.props[key]) and i != self.settled):
                continue
            self.asked.add(key)
            sub = self.pool.narrow(self.props[key], key in self.required)
            if sub is None:
                self.unasked.add(key)
                continue
            hints = self.hints(key, sub)
            out.append(
                field_question(
                    key,
                    sub,
                    key in self.required,
                    hints,
                    described=self.props[key],
                    claimed=self.claimed,
                )
            )
        return out

    def questions(self, answers: dict[str, str]) -> Iterator[FieldQuestion]:
        """The questions one after another: the next once the answer to the one before it is
        in ``answers``."""
        while ready := self.ready(answers):
            yield from ready

    def _settle(self, answers: dict[str, str]) -> None:
        """Take the answers of the leading answered fields into the pool, in order."""
        while self.settled < len(self.order):
            key = self.order[self.settled]
            if key not in self.unasked and key not in answers:
                return
            answer = _loads(answers.get(key, ""))
            if isinstance(answer, dict) and key in answer:
                self.pool.take(answer[key])
            self.settled += 1

    def hints(self, key: str, sub: dict[str, Any]) -> tuple[str, ...]:
        """The document's lines where a label of the field's kind stands (else where a line
        names the field before a colon: ``Age: 85`` for ``age``, ``Salary:`` for
        ``salary_min``), from the label to the end of its value (at most ``_MAX_HINTS``)."""
        concepts = LEXICON.concepts_for(key, str(sub.get("description", "")))
        hits = self.index.labelled(concepts) if concepts else []
        places = [(h.start, h.value[1]) for h in hits if self._stands_as_label(h.start, h.value[0])]
        places = places or self._naming_lines(key)
        out = []
        for start, end in places[:_MAX_HINTS]:
            text = " ".join(self.document[start:end].split())
            out.append(text if len(text) <= _HINT_CHARS else text[:_HINT_CHARS].rsplit(" ", 1)[0])
        return tuple(dict.fromkeys(t for t in out if t))

    def _stands_as_label(self, start: int, value: int) -> bool:
        """Whether a label word stands as a label: first on its line (after a bullet or
        table rule) or before a colon, not inside a sentence (``met the supplier about``)."""
        line = self.document.rfind("\n", 0, start) + 1
        return (
            not self.document[line:start].strip(" \t-*•#|>")
            or ":" in self.document[start : value + 1]
        )

    def _naming_lines(self, key: str) -> list[tuple[int, int]]:
        """``(start, end of line)`` where the field's name words (their longest run first)
        stand before a colon."""
        words = key_words(key)
        for n in range(len(words), 0, -1):
            for i in range(len(words) - n + 1):
                name = r"[\s_-]+".join(map(re.escape, words[i : i + n]))
                found = [
                    (m.start(), _line_end(self.document, m.end()))
                    for m in re.finditer(rf"(?<!\w){name}\s*:", self.document, re.IGNORECASE)
                ]
                if found:
                    return found
        return []


def _line_end(text: str, at: int) -> int:
    end = text.find("\n", at)
    return len(text) if end < 0 else end


def _is_array(sub: Any) -> bool:
    return isinstance(sub, dict) and sub.get("type") == "array"


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None
