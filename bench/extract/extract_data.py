"""Labeled documents for the extraction benchmarks: short texts generated from templates with
known field values (a name, an email, a date, an amount), seeded and reproducible."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

SCHEMA: dict[str, Any] = {
    "title": "payment",
    "description": "A payment mentioned in the document.",
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 40, "description": "Full name of the payer."},
        "email": {"type": "string", "format": "email", "description": "Payer's email."},
        "date": {"type": "string", "format": "date", "description": "Payment date, YYYY-MM-DD."},
        "amount": {"type": "number", "description": "Amount paid."},
    },
    "required": ["name", "email", "date", "amount"],
    "additionalProperties": False,
}
FIELDS = ("name", "email", "date", "amount")

_FIRST = [
    "Ada",
    "Alan",
    "Grace",
    "Linus",
    "Marie",
    "Carl",
    "Emmy",
    "John",
    "Rosa",
    "Nikola",
    "Ida",
    "Kurt",
    "Sofia",
    "Max",
    "Lise",
    "Niels",
    "Hedy",
    "Katherine",
    "Tim",
    "Barbara",
]
_LAST = ["Lovelace", "Turing", "Hopper", "Pauling", "Curie", "Gauss", "Noether", "Nash", "Parks",
         "Tesla", "Wells", "Godel", "Kovalevskaya", "Planck", "Meitner", "Bohr", "Lamarr",
         "Johnson", "Berners-Lee", "Liskov"]  # fmt: skip
_DOMAINS = ["example.com", "mail.example.org", "acme.test", "northwind.example"]
_TEMPLATES = [
    "Payment confirmation: {name} ({email}) paid ${amount} on {date}.",
    "Dear team, on {date} we received {amount} USD from {name}. Contact: {email}.",
    "Invoice settled\nCustomer: {name}\nE-mail: {email}\nDate: {date}\nAmount: {amount} EUR",
    "From: {name} <{email}>\nSubject: refund\n\nHello, I was charged {amount} on {date}. "
    "Please check. Regards, {name}",
    "Receipt #{n}\nPaid by {name} on {date}\nTotal: {amount}\nQuestions? Write to {email}",
    "{date} - transfer of {amount} received from {name} (email: {email}).",
]


@dataclass(frozen=True, slots=True)
class Labeled:
    text: str
    label: dict[str, Any]


def make_documents(n: int, seed: int = 0) -> list[Labeled]:
    """``n`` short documents, each with the values it states."""
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        first, last = rng.choice(_FIRST), rng.choice(_LAST)
        label = {
            "name": f"{first} {last}",
            "email": f"{first.lower()}.{last.lower()}@{rng.choice(_DOMAINS)}",
            "date": f"20{rng.randint(18, 25)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
            "amount": round(rng.randint(100, 99999) / 100, 2),
        }
        template = _TEMPLATES[i % len(_TEMPLATES)]
        text = template.format(n=1000 + i, **{**label, "amount": f"{label['amount']:.2f}"})
        docs.append(Labeled(text, label))
    return docs


def field_correct(field: str, expected: Any, got: Any) -> bool:
    """Exact match after trivial normalisation (case/space for strings, 0.005 for amounts)."""
    if field == "amount":
        try:
            return abs(float(got) - float(expected)) < 0.005
        except (TypeError, ValueError):
            return False
    return isinstance(got, str) and " ".join(got.split()).casefold() == expected.casefold()
