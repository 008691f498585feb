"""What flows through ``stencil extract``: jobs in, outcomes back from a backend, JSONL records out.

A record is ``{"file", "sha256", "ok", "data" | "error", "tokens", "finish_reason"}``, plus
``"spans"`` with ``data`` and ``"warnings"`` when there are any. ``data`` always validates
against the schema (jsonschema): an output that does not parse or validate becomes an error
record. ``spans`` maps the JSON pointer of each value the document states to its ``[start,
end]`` in the document's text (code points; ``stencil.extract.spans``), e.g. ``{"/seller":
[0, 24], "/total": [310, 318], "/line_items/0/description": [120, 139]}``. A document that
states no value for a required field gets an error record with the fields it does state as
``"partial"`` (and their ``"spans"``), for a reviewer to complete.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from stencil.extract.documents import Document


@dataclass(slots=True)
class Job:
    """One document to extract from (``key`` is unique within a run)."""

    key: int
    path: str
    text: str


@dataclass(slots=True)
class Outcome:
    """A backend's answer for one job: the raw output text, or why there is none (both: the
    error's partial record, what the document does state)."""

    key: int
    text: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    error: str | None = None
    warnings: list[str] = field(default_factory=list)
    spans: dict[str, list[int]] = field(default_factory=dict)
    """JSON pointer -> [start, end] in the document of each stated value of ``text``'s record."""

    def as_dict(self) -> dict[str, Any]:
        return {s: getattr(self, s) for s in self.__slots__}


def document_error_record(doc: Document) -> dict[str, Any]:
    """The record of a file that has no text (binary, empty, unreadable)."""
    return _record(doc, False, error=doc.error or "unreadable", tokens=None, finish_reason=None)


def outcome_record(doc: Document, outcome: Outcome, validator: Any) -> dict[str, Any]:
    """The record for a backend outcome: validated data, or an error saying what went wrong."""
    tokens = {"prompt": outcome.prompt_tokens, "completion": outcome.completion_tokens}
    extra = {"tokens": tokens, "finish_reason": outcome.finish_reason}
    warnings = [*doc.warnings, *outcome.warnings]
    if outcome.error is not None and outcome.text is not None:  # what the document does state
        partial = {"partial": json.loads(outcome.text), "spans": outcome.spans}
        return _record(doc, False, warnings, error=outcome.error, **partial, **extra)
    if outcome.error is not None or outcome.text is None:
        return _record(doc, False, warnings, error=outcome.error or "no output", **extra)
    try:
        data = json.loads(outcome.text)
    except ValueError:
        reason = "max_tokens reached" if outcome.finish_reason == "length" else "invalid JSON"
        error = f"output is not JSON ({reason}): {outcome.text[:200]!r}"
        return _record(doc, False, warnings, error=error, **extra)
    problem = _first_error(validator, data)
    if problem is not None:
        return _record(doc, False, warnings, error=f"schema validation failed: {problem}", **extra)
    if outcome.finish_reason not in ("stop", None):
        warnings.append(f"finish_reason={outcome.finish_reason}")
    return _record(doc, True, warnings, data=data, spans=outcome.spans, **extra)


def _record(
    doc: Document, ok: bool, warnings: list[str] | None = None, **fields: Any
) -> dict[str, Any]:
    record: dict[str, Any] = {"file": doc.path, "sha256": doc.sha256, "ok": ok}
    record.update(fields)
    if warnings := warnings if warnings is not None else doc.warnings:
        record["warnings"] = warnings
    return record


def _first_error(validator: Any, data: Any) -> str | None:
    from jsonschema.exceptions import best_match

    error = best_match(validator.iter_errors(data))
    if error is None:
        return None
    pointer = "/" + "/".join(str(p) for p in error.absolute_path)
    return f"{pointer}: {error.message}"


def make_validator(schema: dict[str, Any]) -> Any:
    """A jsonschema validator for the schema's own draft, with format checks."""
    from jsonschema import validators

    cls = validators.validator_for(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)
