"""Scoring extraction output against the corpus labels: per field exact match where the document
states a value, "present when absent" where it does not, and the issue's groups (totals, parties,
currency, dates, line items)."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

GROUPS = {
    "totals": {"total"},
    "parties": {"seller", "buyer", "merchant", "supplier", "sender", "recipient"},
    "currency": {"currency"},
    "dates": {"issue_date", "due_date", "date", "order_date", "delivery_date", "date_of_birth"},
}
ARRAYS = {"line_items": ("description", "amount"), "items": ("name", "price")}


def _norm(value: Any) -> Any:
    if isinstance(value, str):
        return re.sub(r"\s+", " ", value).strip()
    return value


def same(truth: Any, got: Any) -> bool:
    """Exact match: strings up to runs of whitespace, numbers to the cent, arrays item by item."""
    if isinstance(truth, list):
        return isinstance(got, list) and len(got) == len(truth) and all(
            isinstance(g, dict) and all(same(v, g.get(k)) for k, v in t.items())
            for t, g in zip(truth, got, strict=True)
        )  # fmt: skip
    if isinstance(truth, (int, float)) and not isinstance(truth, bool):
        return isinstance(got, (int, float)) and abs(got - truth) < 0.005
    return _norm(truth) == _norm(got)


def invented_items(truth: list[dict] | None, got: Any, keys: tuple[str, str]) -> int:
    """Output items that match no distinct labelled item (neither its text nor its amount)."""
    pool = list(truth or [])
    count = 0
    for item in got if isinstance(got, list) else []:
        text, amount = (item.get(k) if isinstance(item, dict) else None for k in keys)
        hit = next((t for t in pool if same(t[keys[0]], text) or same(t[keys[1]], amount)), None)
        if hit is None:
            count += 1
        else:
            pool.remove(hit)
    return count


class Tally:
    """Counts per (document kind, field) and per group, filled one scored document at a time."""

    def __init__(self) -> None:
        self.exact: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
        self.absent: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
        self.docs: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # docs, valid, all exact
        self.items: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # docs, none invented

    def add(self, kind: str, label: dict[str, Any], data: Any, valid: bool) -> None:
        data = data if isinstance(data, dict) else {}
        doc = self.docs[kind]
        doc[0] += 1
        doc[1] += valid
        right = True
        for field, truth in label.items():
            got = data.get(field)
            if truth is None:
                cell = self.absent[(kind, field)]
                cell[0] += 1
                cell[1] += got is not None
                right &= got is None
            else:
                cell = self.exact[(kind, field)]
                cell[0] += 1
                ok = same(truth, got)
                cell[1] += ok
                right &= ok
            if field in ARRAYS:
                items = self.items[kind]
                items[0] += 1
                items[1] += invented_items(truth, got, ARRAYS[field]) == 0
        doc[2] += right

    def groups(self) -> dict[str, tuple[int, int]]:
        """(right, of) per group, line items (documents with no invented item) and absent fields."""
        out: dict[str, tuple[int, int]] = {}
        for name, fields in GROUPS.items():
            cells = [v for (_, f), v in self.exact.items() if f in fields]
            out[name] = (sum(c[1] for c in cells), sum(c[0] for c in cells))
        items = list(self.items.values())
        out["no invented line item"] = (sum(c[1] for c in items), sum(c[0] for c in items))
        absent = list(self.absent.values())
        out["absent fields absent"] = (sum(c[0] - c[1] for c in absent), sum(c[0] for c in absent))
        docs = list(self.docs.values())
        out["schema-valid"] = (sum(c[1] for c in docs), sum(c[0] for c in docs))
        out["all fields exact"] = (sum(c[2] for c in docs), sum(c[0] for c in docs))
        return out

    def report(self, title: str) -> str:
        lines = [title, "", "| group | share | right / of |", "|---|---:|---:|"]
        for name, (right, of) in self.groups().items():
            lines.append(f"| {name} | {_pct(right, of)} | {right} / {of} |")
        lines += ["", "| kind | field | exact | present when absent |", "|---|---|---:|---:|"]
        for kind, field in sorted(set(self.exact) | set(self.absent)):
            ex, ab = self.exact.get((kind, field)), self.absent.get((kind, field))
            exact = f"{_pct(ex[1], ex[0])} ({ex[1]}/{ex[0]})" if ex else "-"
            absent = f"{_pct(ab[1], ab[0])} ({ab[1]}/{ab[0]})" if ab else "-"
            lines.append(f"| {kind} | {field} | {exact} | {absent} |")
        lines += ["", "| kind | docs | schema-valid | all fields exact | no invented item |",
                  "|---|---:|---:|---:|---:|"]  # fmt: skip
        for kind, (n, valid, right) in sorted(self.docs.items()):
            items = self.items.get(kind)
            inv = _pct(items[1], items[0]) if items else "-"
            lines.append(f"| {kind} | {n} | {_pct(valid, n)} | {_pct(right, n)} | {inv} |")
        return "\n".join(lines)


def _pct(right: int, of: int) -> str:
    return f"{right / of:.0%}" if of else "-"
