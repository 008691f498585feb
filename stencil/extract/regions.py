"""The grounding check of an assembled record: values the document states once fill one field,
and array items come from distinct regions (lines) of the document.

- In a document with a table (at least ``_TABLE_ROWS`` rows: lines that end with a number
  other than a bare year and hold no label or date), an array item with a number (a line item)
  is kept only when one row holds it: the row holds each of its strings and states each of its
  numbers, ends with one of them (the line's amount), holds no label (Total, VAT, Date ...),
  and no earlier item took it: an item is never repeated unless the document repeats it, and
  never assembled from scattered words or a sentence. A field the item schema does not require
  (a quantity) that its row does not hold, or that repeats another of its numbers the row states
  once, is left out of the item, which keeps its row. A plain string part that starts a table
  cell and stops inside it (``WD-40`` of ``WD-40 400ml      £5.49``) runs on to the cell's end
  (a column gap: two blanks, a tab or a ``|``): a row's description is its cell. Other items
  (strings, objects without a number, any item of a document without a table: a CV's jobs with
  their years) are kept as often as the document states them: a repeat the document does not
  repeat is left out.
- A string that starts with a label and its colon (``Kunde: Café Morgenrot``) loses the label;
  one with no letter or digit (a lone ``-``) is no value: left out where optional.
- A string that ends with another field's value after a separator (a venue ``Harbor Park,
  Providence`` beside the city ``Providence``) loses it: each field holds its own part.
- Two top-level fields with the same value where the document states it once: the first (in the
  schema's order, or the required one) keeps it, the other is left out when it is optional.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from stencil.constraints import (
    DocumentIndex,
    date_spans,
    number_runs,
    numbers_in,
    period_spans,
    without_label,
)

_TABLE_ROWS = 2
_LEAD_LINES = 2  # a row's description lines above its amount's line
_TAIL = " \t€£$¥₹%*ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_YEAR = re.compile(r"(?:19|20)\d\d")  # a bare year ends a CV's course line, not a table row
_SEPARATOR_END = re.compile(r"\s*[,;|·–—/-]\s*$")
_FREE_KEYS = ("enum", "const", "format", "pattern")
_GAP = re.compile(r"[ \t]{2,}|\t|\|")  # between a table's cells
_RATES = re.compile(r"(?:[\s|]*\d+(?:[.,]\d+)?\s?%)+[\s|]*$")  # a row's last cells: VAT 23%
_CELL_START = re.compile(r"(?:^[ \t]*|[ \t]{2,}|\t|\|[ \t]*)$")  # what a cell's start follows


class Row(NamedTuple):
    """A line as a table row (``_rows``)."""

    text: str
    """The line with the lines just above it that are no row, single-spaced."""
    numbers: set[float]
    last: float | None
    """The number it ends with; None: no item's row."""
    amount: bool
    """Whether ``last`` may be an amount (not a bare year)."""
    line: str
    """The line as the document has it (its cells apart)."""


def check_record(schema: dict[str, Any], data: dict[str, Any], document: str) -> dict[str, Any]:
    """``data`` with unsupported array items and doubly used values left out."""
    props = schema.get("properties", {})
    required = set(schema.get("required", ()))
    index = DocumentIndex(document)
    out = dict(data)
    for key, value in data.items():
        sub = props.get(key, {})
        if isinstance(value, str) and "enum" not in sub and "const" not in sub:
            out[key] = without_label(value)
            if not _worded(out[key]) and key not in required:
                out.pop(key)
        if isinstance(value, list) and isinstance(sub, dict) and sub.get("type") == "array":
            needed, plain = _needed_parts(sub.get("items")), _plain_parts(sub.get("items"))
            items = distinct_row_items([v for v in value if _worded(v)], index, needed, plain)
            low = sub.get("minItems", 0)
            if len(items) >= low and (items or key in required):
                out[key] = items
            elif len(items) >= low or key not in required:
                out.pop(key)
    return _once(_without_sibling_tails(out, props), props, required, index)


def _worded(value: Any) -> bool:
    """Whether a value may stand as one: a string holds a letter or a digit (a lone ``-`` or
    ``/`` of the document is no value); other values always."""
    return not isinstance(value, str) or any(c.isalnum() for c in value)


def _needed_parts(items: Any) -> frozenset[str] | None:
    """The fields an array's object items require (None: the schema does not say: every
    field)."""
    if not isinstance(items, dict) or not isinstance(items.get("required"), list):
        return None
    return frozenset(items["required"])


def _plain_parts(items: Any) -> frozenset[str]:
    """The fields of an array's object items that are plain strings (no bound, format or
    pattern): those a row's cell may run on."""
    props = items.get("properties") if isinstance(items, dict) else None
    if not isinstance(props, dict):
        return frozenset()
    bounds = (*_FREE_KEYS, "maxLength")
    return frozenset(
        k for k, p in props.items()
        if isinstance(p, dict) and p.get("type") == "string" and not any(b in p for b in bounds)
    )  # fmt: skip


def distinct_row_items(
    items: list[Any],
    index: DocumentIndex,
    needed: frozenset[str] | None = None,
    plain: frozenset[str] = frozenset(),
) -> list[Any]:
    """The items with a number each found on a row of their own (in order; the first row that
    fits), the others each as often as the document states them. An object item's field not in
    ``needed`` (the fields its schema requires; None: all) that its row does not hold is left
    out of the item (a quantity read elsewhere), the rest of the item kept; its ``plain``
    string fields run on to their cells' ends."""
    rows = _rows(index)
    table = sum(row.amount for row in rows) >= _TABLE_ROWS
    used: set[int] = set()
    kept: list[Any] = []
    for item in items:
        if not table or not _numbers(item):
            if kept.count(item) < max(1, _times(item, index.text)):
                kept.append(item)
            continue
        found = next(
            (
                (i, on_row)
                for i, row in enumerate(rows)
                if i not in used and (on_row := _on_row(item, row, needed)) is not None
            ),
            None,
        )
        if found is not None:
            used.add(found[0])
            kept.append(_whole_cells(found[1], rows[found[0]].line, plain))
    return kept


def _numbers(item: Any) -> list[float]:
    values = list(item.values()) if isinstance(item, dict) else [item]
    return [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]


def _times(item: Any, document: str) -> int:
    """How often the document states an item's first string (1 without one)."""
    values = list(item.values()) if isinstance(item, dict) else [item]
    first = next((v for v in values if isinstance(v, str) and v), None)
    return document.count(first) if first else 1


def _rows(index: DocumentIndex) -> list[Row]:
    """Each line as a table row: its text (a row's with the lines just above it that are no
    row, up to a blank line: a description set above its amount), the numbers it states, the
    number it ends with before any rate (``| 578,00 | 23%``; None: the line does not end with
    a number, ends with a period such as ``09/2018 – 03/2020`` or ``Sept. 2019 – Mar. 2022``,
    or holds a date or a label such as Total or VAT: not an item's row), and whether that
    number may be an amount (not a bare year: ``Certificate in Advanced English (C1), 2019``,
    ``© 2026``; such a row still holds an item, but makes no document one with a table)."""
    rows, lead = [], []
    for i, line in enumerate(index.text.splitlines()):
        core = _RATES.sub("", line)  # a prefix of the line: spans are the line's
        spans = number_runs(core)
        tail = core[spans[-1][1] :] if spans else line
        ends = bool(spans) and not tail.strip(_TAIL) and i not in index.label_lines
        ends = ends and not date_spans(line)  # a date's line is no item's row
        ends = ends and not any(s <= spans[-1][0] < e for s, e in period_spans(line))
        text = " ".join(" ".join([*lead, line]).split()) if ends else line
        amount = ends and not _YEAR.fullmatch(line[spans[-1][0] : spans[-1][1]])
        last = spans[-1][2][0] if ends else None
        rows.append(Row(text, set(numbers_in(text)), last, amount, line))
        lead = [] if ends or not line.strip() else [*lead, line][-_LEAD_LINES:]
    return rows


def _on_row(item: Any, row: Row, needed: frozenset[str] | None) -> Any:
    """The item as the row holds it (its strings, the numbers it states, ending with one of
    them), its fields not in ``needed`` the row does not hold left out, and those that repeat
    another field's number the row states once (a quantity that is the line's amount); None:
    not this row."""
    if row.last is None:
        return None
    parts = item if isinstance(item, dict) else {"": item}
    kept = {}
    for key, value in parts.items():
        if _on_line(value, row.text, row.numbers):
            kept[key] = value
        elif needed is None or key in needed or not isinstance(item, dict):
            return None
    if row.last not in _numbers(kept):
        return None
    if not isinstance(item, dict):
        return item
    for key in [k for k in kept if needed is not None and k not in needed]:
        others = [v for k, v in kept.items() if k != key]
        if _numbers({key: kept[key]}) and kept[key] in others and _stated(kept[key], row.text) < 2:
            del kept[key]
    return kept


def _stated(number: float, text: str) -> int:
    """How often ``text`` states ``number``."""
    return sum(float(number) in readings for _, _, readings in number_runs(text))


def _whole_cells(item: Any, line: str, plain: frozenset[str]) -> Any:
    """An object item with each ``plain`` string that starts a cell of ``line`` and stops
    inside it run on to the cell's end, where the rest holds no other part of the item."""
    if not isinstance(item, dict):
        return item
    out = dict(item)
    for key in plain & item.keys():
        if not isinstance(item[key], str):
            continue
        whole = _whole_cell(item[key], line)
        rest = whole[len(item[key]) :]
        if not any(isinstance(v, str) and v and v in rest for k, v in item.items() if k != key):
            out[key] = whole
    return out


def _whole_cell(value: str, line: str) -> str:
    at = line.find(value) if value else -1
    if at < 0 or not _CELL_START.search(line[:at]):
        return value
    gap = _GAP.search(line, at + len(value))
    return line[at : gap.start()].rstrip() if gap else value


def _on_line(value: Any, text: str, numbers: set[float]) -> bool:
    if isinstance(value, str):
        return " ".join(value.split()) in text  # a row's text is single-spaced
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value) in numbers
    return True


def _without_sibling_tails(data: dict[str, Any], props: dict) -> dict[str, Any]:
    """Each plain string that ends with a separator and another plain string field's value,
    without that part."""
    strings = {
        k: v
        for k, v in data.items()
        if isinstance(v, str) and isinstance(props.get(k), dict)
        and not any(f in props[k] for f in _FREE_KEYS)
    }  # fmt: skip
    out = dict(data)
    for key, value in strings.items():
        for other, tail in strings.items():
            if other == key or not tail or len(tail) >= len(value) or not value.endswith(tail):
                continue
            head = value[: -len(tail)]
            cut = _SEPARATOR_END.search(head)
            if cut and _worded(head[: cut.start()]):
                out[key] = head[: cut.start()]
                break
    return out


def _once(
    data: dict[str, Any], props: dict, required: set[str], index: DocumentIndex
) -> dict[str, Any]:
    """Optional fields that repeat an earlier field's value the document states once: left out."""
    dates = index.date_mentions
    order = sorted(
        data, key=lambda k: (k not in required, list(props).index(k) if k in props else 0)
    )
    seen: set[str] = set()
    out = {}
    for key in order:
        value = data[key]
        if isinstance(value, str) and value in seen and key not in required:
            fmt = props.get(key, {}).get("format") if isinstance(props.get(key), dict) else None
            times = dates.count(value) if fmt == "date" else index.text.count(value)
            if times <= 1:
                continue
        if isinstance(value, str):
            seen.add(value)
        out[key] = value
    return {k: out[k] for k in data if k in out}
