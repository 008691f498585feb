"""The numbers and dates a document states, each as many times as it states it: a field asked
later only takes what the fields answered before it left (so a due date is not the issue date
again, and a total is not a line item's amount, unless the document states that value twice)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from stencil.constraints import DocumentIndex


class ValuePool:
    def __init__(self, index: DocumentIndex, numbers: bool, dates: bool) -> None:
        self.numbers = Counter(index.number_mentions) if numbers else None
        self.dates = Counter(index.date_mentions) if dates else None

    def narrow(self, sub: dict[str, Any], required: bool) -> dict[str, Any] | None:
        """``sub`` with each free number or date field in it (itself, or in its array items and
        objects) narrowed to an ``enum`` of the values left; None when that leaves it no value
        and it is optional (a required one comes back as it is, for the grounding rules)."""
        narrowed = self._narrow(sub)
        return sub if narrowed is None and required else narrowed

    def depends(self, sub: Any) -> bool:
        """Whether ``narrow`` reads the pool for ``sub``: a free number or date in it."""
        if not isinstance(sub, dict) or "enum" in sub or "const" in sub:
            return False
        if sub.get("type") == "array":
            return self.depends(sub.get("items"))
        if sub.get("type") == "object" and isinstance(sub.get("properties"), dict):
            return any(self.depends(p) for p in sub["properties"].values())
        if sub.get("type") in ("number", "integer"):
            return self.numbers is not None
        return sub.get("format") == "date" and self.dates is not None

    def _narrow(self, sub: dict[str, Any]) -> dict[str, Any] | None:
        if "enum" in sub or "const" in sub:
            return sub
        if sub.get("type") == "array" and isinstance(sub.get("items"), dict):
            item = self._narrow(sub["items"])
            return None if item is None else {**sub, "items": item}
        if sub.get("type") == "object" and isinstance(sub.get("properties"), dict):
            needed = set(sub.get("required", ()))
            props = {}
            for key, prop in sub["properties"].items():
                narrowed = self._narrow(prop) if isinstance(prop, dict) else prop
                if narrowed is None and key in needed:
                    return None  # an item that cannot be filled
                if narrowed is not None:
                    props[key] = narrowed
            return {**sub, "properties": props}
        if sub.get("type") in ("number", "integer") and self.numbers is not None:
            left = [v for v, n in self.numbers.items() if n > 0]
            if sub["type"] == "integer":
                left = [int(v) for v in left if v == int(v)]
            return {**sub, "enum": left} if left else None
        if sub.get("format") == "date" and self.dates is not None:
            left = [v for v, n in self.dates.items() if n > 0]
            return {**sub, "enum": left} if left else None
        return sub

    def take(self, value: Any) -> None:
        """Use up one mention of each number and date inside ``value``."""
        if isinstance(value, dict):
            for v in value.values():
                self.take(v)
        elif isinstance(value, list):
            for v in value:
                self.take(v)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            if self.numbers is not None and self.numbers[float(value)] > 0:
                self.numbers[float(value)] -= 1
        elif isinstance(value, str) and self.dates is not None and self.dates[value] > 0:
            self.dates[value] -= 1
