"""The grounding check of an assembled record: values the document states once fill one field,
and array items come from distinct regions (lines) of the document.

- An array item (an object) is kept only when one row of the document holds it: its first
  string is the row's leading text (a table's first column), the row ends with one of its
  numbers (the line's amount) and states the others, it holds no label (Total, VAT, Date ...),
  and no earlier item took it: an item is never repeated unless the document repeats it, and
  never assembled from scattered words or a sentence.
- Two top-level fields with the same value where the document states it once: the first (in the
  schema's order, or the required one) keeps it, the other is left out when it is optional.
"""

from __future__ import annotations

import re
from typing import Any

from stencil.constraints import date_mentions, date_spans, numbers_in
from stencil.extract.labels import LabelIndex, number_runs

_TAIL = " \t€£$¥₹%*ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_LEAD = re.compile(r"^(?:\d{1,3}[.)]?\s+)")


def check_record(schema: dict[str, Any], data: dict[str, Any], document: str) -> dict[str, Any]:
    """``data`` with unsupported array items and doubly used values left out."""
    props = schema.get("properties", {})
    required = set(schema.get("required", ()))
    out = dict(data)
    for key, value in data.items():
        sub = props.get(key, {})
        if isinstance(value, list) and isinstance(sub, dict) and sub.get("type") == "array":
            items = distinct_row_items(value, document)
            low = sub.get("minItems", 0)
            if len(items) >= low and (items or key in required):
                out[key] = items
            elif len(items) >= low or key not in required:
                out.pop(key)
    return _once(out, props, required, document)


def distinct_row_items(items: list[Any], document: str) -> list[Any]:
    """The items each found on a row of their own (in order; the first row that fits)."""
    rows = _rows(document)
    used: set[int] = set()
    kept = []
    for item in items:
        row = next((i for i, (text, nums, last) in enumerate(rows)
                    if i not in used and _on_row(item, text, nums, last)), None)  # fmt: skip
        if row is not None:
            used.add(row)
            kept.append(item)
    return kept


def _rows(document: str) -> list[tuple[str, set[float], float | None]]:
    """Each line as a table row: its leading text (before a wide gap or its first number, a
    position number dropped), the numbers it states, the amount it ends with (None: the line
    does not end with a number, or it holds a date or a label such as Total or VAT: not an
    item's row)."""
    labelled = {document.count("\n", 0, hit.start) for hit in LabelIndex(document).hits}
    rows = []
    for i, line in enumerate(document.splitlines()):
        spans = number_runs(line)
        tail = line[spans[-1][1] :] if spans else line
        ends = bool(spans) and not tail.strip(_TAIL) and i not in labelled
        ends = ends and date_spans(line) == []  # a date's line is no item's row
        text = _LEAD.sub("", line.strip())
        text = re.split(r"\s{2,}|\t|\s(?=[-+]?[\d€£$])", text)[0]
        rows.append((text, set(numbers_in(line)), spans[-1][2][0] if ends else None))
    return rows


def _on_row(item: Any, text: str, numbers: set[float], last: float | None) -> bool:
    values = list(item.values()) if isinstance(item, dict) else [item]
    strings = [v for v in values if isinstance(v, str)]
    nums = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if last is None or (strings and strings[0].strip() != text) or last not in nums:
        return False
    return all(v in text for v in strings[1:]) and all(v in numbers for v in nums)


def _once(data: dict[str, Any], props: dict, required: set[str], doc: str) -> dict[str, Any]:
    """Optional fields that repeat an earlier field's value the document states once: left out."""
    dates = date_mentions(doc) or []
    order = sorted(
        data, key=lambda k: (k not in required, list(props).index(k) if k in props else 0)
    )
    seen: set[str] = set()
    out = {}
    for key in order:
        value = data[key]
        if isinstance(value, str) and value in seen and key not in required:
            fmt = props.get(key, {}).get("format") if isinstance(props.get(key), dict) else None
            times = dates.count(value) if fmt == "date" else doc.count(value)
            if times <= 1:
                continue
        if isinstance(value, str):
            seen.add(value)
        out[key] = value
    return {k: out[k] for k in data if k in out}
