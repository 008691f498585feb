"""Where each extracted value came from: a verbatim span of the document for a string, the
place the document states a number or a date for a normalised one (``1.190,00`` -> 1190.0,
``4. März 2024`` -> ``"2024-03-04"``). Offsets count code points (Python's ``str`` indices;
``Array.from(text)`` in JavaScript)."""

from __future__ import annotations

from typing import Any

from stencil.constraints.grounding.stated import date_spans, number_spans


def locate(document: str, value: Any) -> list[dict[str, Any]]:
    """One entry per leaf of ``value`` found in ``document``: its JSON pointer, ``start``,
    ``end``, the ``text`` there, and ``how`` (``verbatim`` or ``stated``)."""
    numbers = number_spans(document)
    dates = date_spans(document) or []
    out = []
    for pointer, leaf in _leaves(value, ""):
        span = _find(document, leaf, numbers, dates)
        if span is not None:
            start, end, how = span
            out.append(
                {
                    "pointer": pointer,
                    "start": start,
                    "end": end,
                    "text": document[start:end],
                    "how": how,
                }
            )
    return out


def _leaves(value: Any, pointer: str) -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        return [
            leaf
            for key, sub in value.items()
            for leaf in _leaves(sub, f"{pointer}/{_escape(str(key))}")
        ]
    if isinstance(value, list):
        return [leaf for i, sub in enumerate(value) for leaf in _leaves(sub, f"{pointer}/{i}")]
    return [(pointer, value)]


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _find(
    document: str,
    leaf: Any,
    numbers: list[tuple[int, int, float]],
    dates: list[tuple[int, int, str]],
) -> tuple[int, int, str] | None:
    if isinstance(leaf, bool) or leaf is None:
        return None
    if isinstance(leaf, str):
        if not leaf:
            return None
        at = document.find(leaf)
        if at >= 0:
            return at, at + len(leaf), "verbatim"
        return next(((s, e, "stated") for s, e, iso in dates if iso == leaf), None)
    if isinstance(leaf, int | float):
        text = str(leaf)
        for start, end, v in numbers:
            if v == leaf:
                return start, end, "verbatim" if document[start:end] == text else "stated"
        at = document.find(text)
        return (at, at + len(text), "verbatim") if at >= 0 else None
    return None
