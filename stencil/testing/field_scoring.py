"""Scoring of extracted records against hand-written truths, field by field (the hand-written
corpus, ``bench/extract/handwritten/``; its README says what a truth holds).

Matching rule per field kind (the schema property's shape):

- ``string`` (plain, ``format: email``, or with a ``pattern``): equal after Unicode NFC,
  case folding, runs of whitespace made one space, and outer whitespace and trailing ``.,;:``
  stripped;
- ``number`` / ``integer``: numerically equal to the cent (``|a - b| < 0.005``);
- ``date`` (``format: date``): the same ISO date string;
- ``enum`` and ``boolean``: equal;
- ``array of strings``: items matched one to one (the string rule, or one of the item's
  ``also`` variants); item recall = matched / the truth's items, item precision = matched /
  the output's items that are neither matched nor an ``extra`` of the truth plus matched; the
  field is right when every item is matched and none invented;
- ``array of objects``: an output item matches a truth item when every sub-field the schema
  requires of an item matches (its own kind's rule, with ``also`` variants of
  ``"field.sub"``), one to one, first match first; the optional sub-fields of matched items are
  then scored like fields; the field is right when every item is matched, none invented and
  every sub-field of the matched items right;
- a field the truth marks absent is right when the output leaves it out, or gives null, an
  empty string or an empty array (or a value its ``also`` accepts); a value there is invented.

Every field of a file whose record failed counts as not right (so failing is never a way to
leave absent fields absent).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

# a word list: packed lines read better than the formatter's one word per line
PLACEHOLDERS = frozenset(
    {"value", "string", "text", "n/a", "na", "none", "null", "unknown", "not stated",
     "not specified", "not available", "not given", "example", "...", "-", "tbd", "xxx",
     "name", "your name", "john doe", "jane doe", "lorem ipsum"}
)  # fmt: skip


def field_kind(prop: dict[str, Any]) -> str:
    """The scoring kind of a schema property: string, number, date, enum, boolean, array of
    strings, array of objects."""
    if "enum" in prop:
        return "enum"
    kind = prop.get("type")
    if kind == "array":
        items = prop.get("items", {})
        return "array of objects" if items.get("type") == "object" else "array of strings"
    if kind in ("number", "integer"):
        return "number"
    if kind == "string" and prop.get("format") == "date":
        return "date"
    if kind == "boolean":
        return "boolean"
    return "string"


def normalize(text: str) -> str:
    text = " ".join(unicodedata.normalize("NFC", text).casefold().split())
    return text.rstrip(".,;:").strip()


def same(kind: str, got: Any, want: Any) -> bool:
    """``got`` equals ``want`` under ``kind``'s rule (module docstring)."""
    if got is None:
        return want is None
    if kind == "number":
        return _is_number(got) and _is_number(want) and math.isclose(got, want, abs_tol=0.005)
    if kind in ("enum", "boolean", "date"):
        return type(got) is type(want) and got == want
    return isinstance(got, str) and isinstance(want, str) and normalize(got) == normalize(want)


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def is_empty(value: Any) -> bool:
    return value is None or value == "" or value == []


@dataclass
class Tally:
    """Counts over many fields: ratios (hits of a total) and plain counts."""

    ratios: Counter = field(default_factory=Counter)
    counts: Counter = field(default_factory=Counter)

    def add(self, name: str, hits: bool | int, total: int = 1) -> None:
        self.ratios[f"{name}/hit"] += int(hits)
        self.ratios[f"{name}/total"] += total

    def count(self, name: str, n: bool | int = 1) -> None:
        self.counts[name] += int(n)

    def ratio(self, name: str) -> tuple[int, int]:
        return self.ratios[f"{name}/hit"], self.ratios[f"{name}/total"]

    def merge(self, other: Tally) -> None:
        self.ratios.update(other.ratios)
        self.counts.update(other.counts)


def score_record(
    schema: dict[str, Any], truth: dict[str, Any], record: dict[str, Any] | None, document: str
) -> Tally:
    """One document's tally. ``record``: its ``stencil extract`` record (None: missing)."""
    tally = Tally()
    ok = bool(record and record.get("ok"))
    tally.add("files ok", ok)
    data = record.get("data", {}) if ok else {}
    required = set(schema.get("required", []))
    also, extra = truth.get("also", {}), truth.get("extra", {})
    for name, prop in schema["properties"].items():
        kind = field_kind(prop)
        stated = name in truth["values"]
        got = data.get(name)
        if stated:
            right = ok and _score_present(tally, name, kind, prop, got, truth, also, extra)
            tally.add("present fields right", right)
            if name not in required:
                tally.add("optional-field recall", right)
        else:
            accepted = also.get(name, [])
            right = ok and (is_empty(got) or any(same(kind, got, a) for a in accepted))
            tally.add("absent fields absent", right)
            tally.count("invented values", ok and not right)
        tally.add("fields right", right)
        tally.add(f"kind: {kind}", right)
    if ok:
        _count_suspects(tally, data, schema, document)
    return tally


def _score_present(tally, name, kind, prop, got, truth, also, extra) -> bool:
    want = truth["values"][name]
    if kind == "array of strings":
        return _score_strings(tally, got, want, also.get(name, {}), extra.get(name, []))
    if kind == "array of objects":
        return _score_objects(tally, name, prop["items"], got, want, also)
    return any(same(kind, got, w) for w in [want, *also.get(name, [])])


def _score_strings(tally, got, want, variants, extras) -> bool:
    got = got if isinstance(got, list) else []
    unmatched = list(want)
    invented = 0
    for item in got:
        hit = next(
            (
                w
                for w in unmatched
                if any(same("string", item, v) for v in [w, *variants.get(w, [])])
            ),
            None,
        )
        if hit is not None:
            unmatched.remove(hit)
        elif not any(same("string", item, e) for e in extras):
            invented += 1
    matched = len(want) - len(unmatched)
    tally.add("array-item recall", matched, len(want))
    tally.add("array-item precision", matched, matched + invented)
    tally.count("invented values", invented)
    return not unmatched and not invented


def _score_objects(tally, name, item_schema, got, want, also) -> bool:
    got = [g for g in got if isinstance(g, dict)] if isinstance(got, list) else []
    keys = item_schema.get("required", [])
    kinds = {k: field_kind(p) for k, p in item_schema["properties"].items()}

    def matches(g: dict, w: dict, key: str) -> bool:
        variants = also.get(f"{name}.{key}", {}).get(w.get(key), []) if key in w else []
        return any(same(kinds[key], g.get(key), v) for v in [w.get(key), *variants])

    unmatched = list(want)
    pairs, invented = [], 0
    for g in got:
        hit = next((w for w in unmatched if all(matches(g, w, k) for k in keys)), None)
        if hit is None:
            invented += 1
        else:
            unmatched.remove(hit)
            pairs.append((g, hit))
    subs_right = True
    for g, w in pairs:
        for key in kinds.keys() - set(keys):
            right = matches(g, w, key) if key in w else is_empty(g.get(key))
            tally.add("item sub-fields right", right)
            tally.count("invented values", key not in w and not right)
            subs_right &= right
    matched = len(pairs)
    tally.add("array-item recall", matched, len(want))
    tally.add("array-item precision", matched, matched + invented)
    tally.count("invented values", invented)
    return not unmatched and not invented and subs_right


def _strings(value: Any, prop: dict[str, Any]):
    """The plain-string values anywhere in ``value`` (as ``prop`` types them)."""
    if isinstance(value, list):
        for item in value:
            yield from _strings(item, prop.get("items", {}))
    elif isinstance(value, dict):
        for key, sub in value.items():
            yield from _strings(sub, prop.get("properties", {}).get(key, {}))
    elif isinstance(value, str) and _copied(prop):
        yield value


def _copied(prop: dict[str, Any]) -> bool:
    """A string the document must state as written (not a normalized date, time or enum)."""
    return (
        field_kind(prop) == "string"
        and "pattern" not in prop
        and prop.get("format") in (None, "email")
    )


def _count_suspects(tally: Tally, data: dict, schema: dict, document: str) -> None:
    """Strings the document does not state, and placeholders (a placeholder word the document
    does not hold as a word)."""
    text = normalize(document)
    for value in _strings(data, schema):
        said = normalize(value)
        tally.count("strings not in the document", bool(said) and said not in text)
        word = re.search(rf"(?<!\w){re.escape(said)}(?!\w)", text)
        tally.count("placeholder values", said in PLACEHOLDERS and not word)
