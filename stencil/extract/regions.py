"""The grounding check of an assembled record: values the document states once fill one field,
and array items come from distinct regions (lines) of the document.

- An array item (an object) is kept only when one line of the document holds all its string
  values and states all its numbers, and no earlier item took that line: an item is never
  repeated unless the document repeats it, and never assembled from scattered words.
- Two top-level fields with the same value where the document states it once: the first (in the
  schema's order, or the required one) keeps it, the other is left out when it is optional.
"""

from __future__ import annotations

from typing import Any

from stencil.constraints import date_mentions, numbers_in


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
    """The items each found on a line of their own (in order; the first line that fits)."""
    lines = [(line, set(numbers_in(line))) for line in document.splitlines()]
    used: set[int] = set()
    kept = []
    for item in items:
        row = next((i for i, (line, nums) in enumerate(lines)
                    if i not in used and _on_line(item, line, nums)), None)  # fmt: skip
        if row is not None:
            used.add(row)
            kept.append(item)
    return kept


def _on_line(item: Any, line: str, numbers: set[float]) -> bool:
    values = item.values() if isinstance(item, dict) else [item]
    for v in values:
        if isinstance(v, str) and v not in line:
            return False
        if isinstance(v, (int, float)) and not isinstance(v, bool) and float(v) not in numbers:
            return False
    return True


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
