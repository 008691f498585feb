"""One record from the answers of a document's windows (``windows``), with the spans of its
values (``spans``), never a grounded value the document does not state.

- Each window's answer is first pruned: a value of a grounded kind (a plain string, a free
  number, a free ``format: date`` string, an ``x-grounded`` string: ``Grounding``) that its
  window does not state is dropped (a number its schema's description states, ``0 if free``,
  is kept: ``described_numbers``; an optional property or an array item goes; a required
  property, or every property, takes its object with it). Grounding lets a date or number field run free where its
  window states none; such a value is never kept.
- An array field takes the items of every window in document order; an item read twice in the
  overlap of two windows (the same value at the same place) is kept once.
- Any other field answered by several windows takes one answer: one whose value stands on a
  line that names the field (``Secretary: Jane Doe`` for ``secretary``) first, else one the
  document states (a span) over one it does not, else the first window's. A value found only in
  a later window is kept.
- A required field with no answer left is reported in ``Merged.missing`` (the record is then an
  error saying so: a required value the document does not state is never filled in).

With more than one window, each window is asked with every top-level field optional
(``window_schema``): a field its window does not state is not answered there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from stencil.constraints import described_numbers
from stencil.extract.spans import Locator, escape_pointer, key_words
from stencil.extract.windows import Window

_DROP = object()


@dataclass(frozen=True, slots=True)
class Grounding:
    """Which kinds of value were grounded (``stencil extract --grounded``'s three switches)."""

    strings: bool = True
    numbers: bool = True
    dates: bool = True

    def covers(self, sub: Any) -> bool:
        """Whether a value of schema ``sub`` had to be stated by the document."""
        if not isinstance(sub, dict) or sub.get("x-grounded") is False:
            return False
        if sub.get("x-grounded") is True:
            return True
        if "enum" in sub or "const" in sub:
            return False
        kind = sub.get("type")
        if kind == "string" and sub.get("format") == "date":
            return self.dates
        if kind == "string":
            free = [k for k in ("format", "pattern", "contentEncoding") if k in sub]
            return (
                self.strings and free in ([], ["format"]) and sub.get("format", "email") == "email"
            )
        return kind in ("number", "integer") and self.numbers


@dataclass(slots=True)
class WindowAnswer:
    """One window's record (after ``regions.check_record``)."""

    window: Window
    data: dict[str, Any]


@dataclass(slots=True)
class Merged:
    data: dict[str, Any]
    spans: dict[str, list[int]] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    """Required top-level fields no window stated."""


def window_schema(schema: dict[str, Any], windows: int) -> dict[str, Any]:
    """The schema a window is asked with: every top-level field optional when there are several
    windows (a field may be stated in another one)."""
    if windows <= 1 or not schema.get("required"):
        return schema
    return {k: v for k, v in schema.items() if k != "required"}


def merge(schema: dict[str, Any], answers: list[WindowAnswer], grounding: Grounding) -> Merged:
    """The record of a document from its windows' answers, as the module says."""
    props = schema.get("properties", {})
    keys = list(dict.fromkeys([*props, *(k for a in answers for k in a.data)]))
    out = Merged({})
    read = [(a.data, Locator(a.window.text, a.window.start)) for a in answers]
    for key in keys:
        sub = props.get(key, {})
        found = []
        for data, locator in read:
            if key in data:
                value = _prune(data[key], sub, locator, grounding)
                if value is not _DROP:
                    found.append((locator, value))
        if not found:
            continue
        if isinstance(sub, dict) and sub.get("type") == "array":
            _merge_items(out, key, sub, found)
        else:
            locator, value = _choose(key, found)
            out.data[key] = value
            out.spans.update(locator.spans(key, value))
    out.missing = [k for k in schema.get("required", ()) if k not in out.data]
    return out


def _prune(value: Any, sub: Any, locator: Locator, grounding: Grounding) -> Any:
    """``value`` without the grounded values ``locator``'s text does not state (``_DROP``:
    nothing left of it)."""
    sub = sub if isinstance(sub, dict) else {}
    if isinstance(value, dict):
        props, required = sub.get("properties", {}), set(sub.get("required", ()))
        kept = {}
        for key, item in value.items():
            pruned = _prune(item, props.get(key, {}), locator, grounding)
            if pruned is not _DROP:
                kept[key] = pruned
            elif key in required:
                return _DROP
        return kept if kept or not value else _DROP  # nothing of it stated: none of it
    if isinstance(value, list):
        items = [_prune(item, sub.get("items", {}), locator, grounding) for item in value]
        kept = [item for item in items if item is not _DROP]
        return kept if len(kept) >= sub.get("minItems", 0) else _DROP
    if grounding.covers(sub) and not locator.occurrences(value):
        return value if value in described_numbers(sub) else _DROP
    return value


def _choose(key: str, found: list[tuple[Locator, Any]]) -> tuple[Locator, Any]:
    """The answer of a field several windows gave, as the module says."""
    words = key_words(key)

    def rank(pair: tuple[Locator, Any]) -> tuple[bool, bool]:
        locator, value = pair
        placed = locator.place("", words, value)
        named = any(locator.names(start - locator.offset, words) for _, start, _, _ in placed)
        return (not named, not placed)

    return min(found, key=rank)  # min keeps the first of equals: document order


def _merge_items(out: Merged, key: str, sub: dict, found: list[tuple[Locator, Any]]) -> None:
    """Every window's items, in document order, each place read once."""
    words = key_words(key)
    seen: set[str] = set()
    items: list[tuple[Locator, Any]] = []
    for locator, value in found:
        for item in value:
            places = [(s, e) for _, s, e, _ in locator.place("", words, item)]
            sign = json.dumps([item, places if places else None], sort_keys=True)
            if sub.get("uniqueItems"):
                sign = json.dumps(item, sort_keys=True)
            if sign not in seen:
                seen.add(sign)
                items.append((locator, item))
    items = items[: sub.get("maxItems", len(items))]
    out.data[key] = [item for _, item in items]
    for i, (locator, item) in enumerate(items):
        root = f"/{escape_pointer(key)}/{i}"
        out.spans.update({p: [s, e] for p, s, e, _ in locator.place(root, words, item)})
