"""A document read window by window (shared by the engine and server backends): its windows
(``windows``), the schema each window is asked with, and the one Outcome made of their answers
(``merge``): a record with the ``spans`` of its values, or an error naming the required fields
the document does not state."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from stencil.extract import questions
from stencil.extract.merge import Grounding, WindowAnswer, merge, window_schema
from stencil.extract.prompt import PromptBuilder
from stencil.extract.records import Outcome
from stencil.extract.regions import check_record
from stencil.extract.windows import Window, split_windows


@dataclass(frozen=True, slots=True)
class DocumentWindows:
    windows: list[Window]
    schema: dict[str, Any]
    """The schema every window is asked with (``merge.window_schema``)."""
    warnings: list[str]

    def schema_for(self, window: Window) -> dict[str, Any]:
        """``schema`` narrowed to what ``window`` states (``questions.narrow_schema``)."""
        return questions.narrow_schema(self.schema, window.text)


def read_windows(
    builder: PromptBuilder, schema: dict[str, Any], filename: str, text: str
) -> DocumentWindows:
    """The windows one document is read in (ValueError: the prompt leaves no room for it)."""
    budget = builder.document_budget(filename)
    windows = split_windows(text, budget, builder.counter)
    warnings = []
    if len(windows) > 1:
        warnings.append(
            f"document read in {len(windows)} windows of at most {budget} tokens (it has "
            f"{builder.counter.count(text)}; context {builder.context} tokens with "
            f"max_tokens={builder.max_tokens})"
        )
    return DocumentWindows(windows, window_schema(schema, len(windows)), warnings)


def outcome(
    key: int,
    schema: dict[str, Any],
    per_field: bool,
    grounding: Grounding,
    parts: list[tuple[Window, dict[str, Any], dict[str, str]]],
    counts: dict[str, Any],
) -> Outcome:
    """The Outcome of one document from each window's (window, schema it was asked with,
    answers: field -> raw answer text, or the one whole-record answer)."""
    answers = []
    for window, asked, texts in parts:
        if per_field:
            data = questions.assemble(asked, texts)
        else:
            text = next(iter(texts.values()), "")
            data = _loads(text)
            if not isinstance(data, dict):  # the record says why it is no JSON object
                return Outcome(key, text=text, **counts)
        answers.append(WindowAnswer(window, check_record(asked, data, window.text)))
    merged = merge(schema, answers, grounding)
    missing = ", ".join(merged.missing)
    error = f"the document states no value for required field(s): {missing}" if missing else None
    text = json.dumps(merged.data, ensure_ascii=False)  # with an error: what it does state
    return Outcome(key, text=text, spans=merged.spans, error=error, **counts)


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None
