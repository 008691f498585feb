"""``locate``: each extracted value's place in the document, checked by slicing the document."""

from __future__ import annotations

import pytest

from stencil.playground.spans import locate

CASES = [
    # (document, value, {pointer: (text at the span, how)})
    (
        "Ada Lovelace was 36 years old.",
        {"name": "Ada Lovelace", "age": 36},
        {"/name": ("Ada Lovelace", "verbatim"), "/age": ("36", "verbatim")},
    ),
    (
        "Rechnung vom 4. März 2024, Summe 1.190,00 EUR",
        {"date": "2024-03-04", "total": 1190.0, "currency": "EUR"},
        {
            "/date": ("4. März 2024", "stated"),
            "/total": ("1.190,00", "stated"),
            "/currency": ("EUR", "verbatim"),
        },
    ),
    (
        "Items: tea 2.50, cake 4.00",
        {"items": [{"name": "tea", "price": 2.5}, {"name": "cake", "price": 4.0}]},
        {
            "/items/0/name": ("tea", "verbatim"),
            "/items/0/price": ("2.50", "stated"),
            "/items/1/name": ("cake", "verbatim"),
            "/items/1/price": ("4.00", "stated"),
        },
    ),
    (  # not in the text, empty, null and booleans: no span
        "nothing here",
        {"a/b": "elsewhere", "c": "", "d": None, "e": True, "f": 7},
        {},
    ),
    ("naïve café ☕ 12", {"drink": "café ☕", "n~": 12}, {"/drink": ("café ☕", "verbatim"),
                                                       "/n~0": ("12", "verbatim")}),
]  # fmt: skip


@pytest.mark.parametrize(("document", "value", "expected"), CASES)
def test_locate(document: str, value: object, expected: dict) -> None:
    spans = locate(document, value)
    got = {s["pointer"]: (s["text"], s["how"]) for s in spans}
    assert got == expected
    for s in spans:
        assert document[s["start"] : s["end"]] == s["text"]
