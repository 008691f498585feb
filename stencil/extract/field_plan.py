"""The questions of one document, field by field, each narrowed to what the document states for
that field before it is asked (shared by the engine and server backends).

Order: required fields first, arrays last, else the schema's. Every field is asked, unless
grounding leaves it nothing to copy. Each field's schema is narrowed by ``ValuePool`` (the
numbers and dates the answers before it left: a due date is not the issue date again, a total
not a line amount, unless the document states the value twice); an optional field with none
left is not asked. Only those fields wait for the answers before them: a field with no free
number or date in it is asked at once, beside the others (``FieldPlan.ready``), and gets the
question it would get after them.

A question quotes no line of the document (no "labelled ..." hint): on the hand-written dev
split such quotes, picked by the lexicon's labels, took the 1.5B from the right value to the
labelled one (an e-mail's ``To:`` as the customer, ``Next meeting:`` as the meeting's date) 6
times in 6 disagreements (docs/extraction.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from stencil.constraints import DocumentIndex, claimed_kinds
from stencil.extract.questions import FieldQuestion, field_question
from stencil.extract.value_pool import ValuePool


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
            out.append(
                field_question(
                    key, sub, key in self.required, described=self.props[key], claimed=self.claimed
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


def _is_array(sub: Any) -> bool:
    return isinstance(sub, dict) and sub.get("type") == "array"


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None
