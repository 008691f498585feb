"""The values a text states, normalized: numbers (``1,580.00`` -> 1580.0) and calendar dates
(``2024-03-04``, ``March 4, 2024``, ``4 Mar 2024`` -> ``"2024-03-04"``), for grounding free
number and ``format: date`` fields in the values of a source text."""

from __future__ import annotations

import datetime
import re

_NUMBER = re.compile(r"(?<![\w.,\-])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w,]*\d)")
_FULL = "january february march april may june july august september october november december"
_MONTHS = {
    **{name: i + 1 for i, name in enumerate(_FULL.split())},
    **{name[:3]: i + 1 for i, name in enumerate(_FULL.split())},
    "sept": 9,
}
_MONTH = r"(?P<mon>[A-Za-z]{3,9})\.?"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>\d{4})"
_DATES = [
    re.compile(rf"(?<![\w\-/.]){_YEAR}(?P<sep>[\-/.])(?P<num>\d{{1,2}})(?P=sep){_DAY}(?![\w\-/])"),
    re.compile(rf"\b{_MONTH} {_DAY},? {_YEAR}\b"),
    re.compile(rf"\b{_DAY} {_MONTH},? {_YEAR}\b"),
]
# day and month in an order only the reader's locale knows (03/04/2024)
_AMBIGUOUS = re.compile(r"(?<![\w\-/.])\d{1,2}[\-/.]\d{1,2}[\-/.]\d{2,4}(?![\w\-/])")


def numbers_in(source: str) -> list[float]:
    """The numbers a text states (``1,580.00`` -> 1580.0), each once, in order."""
    found = (float(m.group().replace(",", "")) for m in _NUMBER.finditer(source))
    return list(dict.fromkeys(found))


def dates_in(source: str) -> list[str] | None:
    """The calendar dates a text states, as ISO ``YYYY-MM-DD``, each once, in order of first
    appearance; ``None`` when it also writes a date this cannot read unambiguously."""
    if _AMBIGUOUS.search(source):
        return None
    found = []
    for pattern in _DATES:
        for m in pattern.finditer(source):
            iso = _iso(m)
            if iso is not None:
                found.append((m.start(), iso))
    return list(dict.fromkeys(iso for _, iso in sorted(found)))


def _iso(m: re.Match) -> str | None:
    parts = m.groupdict()
    if parts.get("num") is not None:
        month = int(parts["num"])
    else:
        month = _MONTHS.get(parts["mon"].lower())
        if month is None:
            return None
    try:
        return datetime.date(int(parts["year"]), month, int(parts["day"])).isoformat()
    except ValueError:
        return None
