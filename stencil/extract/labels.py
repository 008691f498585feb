"""Where a document labels its values: each place it prints a label of ``label_words`` (``Total:``,
``Gesamtbetrag``, ``Bill to:``, ``Fällig am``, ``Numéro de facture``), and what follows it on
its line (or on the next line, under a label that ends its line): the excerpt a field's question
quotes (``field_plan``), and the lines that are no table row (``regions``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from stencil.constraints import number_spans
from stencil.extract.label_words import LABELS

_PUNCT = " \t:.-–#°º|"


@dataclass(frozen=True, slots=True)
class Hit:
    concepts: frozenset[str]
    start: int
    """Where the label starts in the document."""
    value: tuple[int, int]
    """The text after it: to the next label of another concept on the line, or the next line."""


class LabelIndex:
    """The labels of one document and the values after them."""

    def __init__(self, document: str) -> None:
        self.document = document
        self.hits = _hits(document)

    def of(self, concepts: tuple[str, ...]) -> list[Hit]:
        """The hits of the first of ``concepts`` the document labels (none: ``[]``)."""
        for concept in concepts:
            hits = [h for h in self.hits if concept in h.concepts]
            if hits:
                return hits
        return []


def without_label(text: str) -> str:
    """``text`` less a label it starts with, where a colon follows the label (``Kunde: Café
    Morgenrot`` -> ``Café Morgenrot``; ``Total Gym Ltd`` stays)."""
    m = _LABEL.match(text)
    if m is None or not (m.group().endswith(":") or re.match(r"\s*:", text[m.end() :])):
        return text
    rest = text[m.end() :].lstrip(_PUNCT)
    return rest or text


def number_runs(text: str) -> list[tuple[int, int, list[float]]]:
    """``(start, end, readings)`` of each number ``text`` states, in order (readings as
    ``numbers_in``: one, two where the decimal mark stays unknown; a spaced run also reads as
    its parts, after the whole)."""
    runs: dict[tuple[int, int], list[float]] = {}
    for start, end, value in number_spans(text):
        runs.setdefault((start, end), []).append(value)
    return [(start, end, values) for (start, end), values in runs.items()]


def _pattern() -> re.Pattern[str]:
    words = sorted({w for ws in LABELS.values() for w in ws}, key=len, reverse=True)
    alts = [re.escape(w[:-1]) + r"\s*:" if w.endswith(":") else re.escape(w) for w in words]
    alts = [a.replace(r"\ ", r"\s+") for a in alts]
    return re.compile(rf"(?<![\w./-])(?:{'|'.join(alts)})(?![\w/-])", re.IGNORECASE)


def _concepts(label: str) -> frozenset[str]:
    key = re.sub(r"\s*:$", ":", " ".join(label.lower().split()))
    return frozenset(c for c, words in LABELS.items() if key in words or key.rstrip(":") in words)


_LABEL = _pattern()  # every label of the lexicon, longest first


def _hits(document: str) -> list[Hit]:
    found = [(m.start(), m.end(), _concepts(m.group())) for m in _LABEL.finditer(document)]
    hits = []
    for i, (start, end, concepts) in enumerate(found):
        line_end = document.find("\n", end)
        line_end = len(document) if line_end < 0 else line_end
        stop = next((s for s, _, c in found[i + 1 :] if s < line_end and not c & concepts),
                    line_end)  # fmt: skip
        value = (end, stop)
        if not document[end:stop].strip(_PUNCT):  # the value is on the next line
            rest = document[line_end:].lstrip("\n")
            nxt = len(document) - len(rest)
            value = (nxt, nxt + len(rest.split("\n", 1)[0]))
        hits.append(Hit(concepts, start, value))
    return hits
