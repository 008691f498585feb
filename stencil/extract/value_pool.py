"""The numbers and dates a document states, each as many times as it states it: a field asked
later only takes what the fields answered before it left (so a due date is not the issue date
again, and a total is not a line item's amount, unless the document states that value twice)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from stencil.constraints import date_mentions, number_mentions


class ValuePool:
    def __init__(self, document: str, numbers: bool, dates: bool) -> None:
        self.numbers = Counter(number_mentions(document)) if numbers else None
        mentions = date_mentions(document) if dates else None
        self.dates = Counter(mentions) if mentions is not None else None

    def narrow(self, sub: dict[str, Any], required: bool) -> dict[str, Any] | None:
        """``sub`` (a free number or date field) with an ``enum`` of the values left; None when
        none is left and the field is optional. Other fields come back as they are."""
        if "enum" in sub or "const" in sub:
            return sub
        if sub.get("type") in ("number", "integer") and self.numbers is not None:
            left = [v for v, n in self.numbers.items() if n > 0]
            if sub["type"] == "integer":
                left = [int(v) for v in left if v == int(v)]
            return _with_enum(sub, left, required)
        if sub.get("format") == "date" and self.dates is not None:
            return _with_enum(sub, [v for v, n in self.dates.items() if n > 0], required)
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


def _with_enum(sub: dict[str, Any], left: list, required: bool) -> dict[str, Any] | None:
    if left:
        return {**sub, "enum": left}
    return None if not required else sub
