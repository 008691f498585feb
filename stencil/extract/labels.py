"""Where a document labels its values: each place it prints a label of ``label_words`` (``Total:``,
``Gesamtbetrag``, ``Bill to:``, ``Fällig am``, ``Numéro de facture``), and what follows it on
its line (or on the next line, under a label that ends its line): the numbers, dates, codes and
names a labelled field may take. Also the party names a document prints at its head, one per
block (the letterhead, the recipient's address)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from stencil.constraints import date_spans, number_spans
from stencil.extract.label_words import LABELS

_PUNCT = " \t:.-–#°º|"
_PERCENT = re.compile(r"\s*%")
_CURRENCY = re.compile(r"[€£$¥₹]|(?<![A-Za-z])[A-Z]{3}(?![A-Za-z])")
_MAX_NAME_WORDS = 8


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

    def numbers(self, hits: list[Hit]) -> list[float]:
        """The first number after each label (not a percentage), all its readings."""
        out: list[float] = []
        for hit in hits:
            found = [n for n in self._numbers if hit.value[0] <= n[0] < hit.value[1]]
            found = [n for n in found if not _PERCENT.match(self.document, n[1])]
            if found:  # a spaced run (1 234,56) also reads as its parts: the whole only
                start, end, readings = found[0]
                out += readings[:1] if re.search(r"\s", self.document[start:end]) else readings
        return list(dict.fromkeys(out))

    def dates(self, hits: list[Hit]) -> list[str]:
        """The first date after each label."""
        out = []
        for hit in hits:
            found = [d for d in self._dates if hit.value[0] <= d[0] < hit.value[1]]
            out += [found[0][2]] if found else []
        return list(dict.fromkeys(out))

    def codes(self, hits: list[Hit], pattern: str) -> list[str]:
        """The first word after each label that matches ``pattern`` and holds a digit, not a
        date (an invoice or order number)."""
        out = []
        for hit in hits:
            for m in re.finditer(r"\S+", self.document[hit.value[0] : hit.value[1]]):
                word = m.group().rstrip(".,;:)")
                start = hit.value[0] + m.start()
                if (any(c.isdigit() for c in word) and re.search(pattern, word)
                        and not any(d[0] <= start < d[1] for d in self._dates)):  # fmt: skip
                    out.append(word)
                    break
        return list(dict.fromkeys(out))

    def texts(self, hits: list[Hit]) -> list[str]:
        """The text after each label, up to a wide gap (a table's next column)."""
        out = []
        for hit in hits:
            text = self.document[hit.value[0] : hit.value[1]].lstrip(_PUNCT).rstrip()
            out.append(re.split(r"\s{3,}|\t", text)[0])
        return [t for t in dict.fromkeys(out) if t]

    def names(self, hits: list[Hit]) -> list[str]:
        """``texts`` that read as names (no digit), and each one's part before a comma."""
        out = []
        for text in self.texts(hits):
            out += [t for t in (text, text.split(",")[0].strip()) if _name_like(t)]
        return list(dict.fromkeys(out))

    def money(self) -> list[float]:
        """The amounts of money the document states (two decimals, or a currency beside
        them), largest first."""
        out = []
        for start, end, readings in self._numbers:
            near = self.document[max(0, start - 4) : end + 4]
            if re.search(r"[.,]\d\d$", self.document[start:end]) or _CURRENCY.search(near):
                out.append(readings[0])
        return sorted(set(out), reverse=True)

    @cached_property
    def head_names(self) -> list[str]:
        """The first line of each block (lines between blank lines) before the body: a line with
        no digit and no label, of a few words, not a greeting (``Dear ...,``); the body starts at
        the first line of many words or one that ends in ``,`` or ``:``."""
        out, first, start = [], True, 0
        for line in self.document.splitlines(keepends=True):
            text, end = line.strip(), start + len(line)
            if not text:
                first = True
            elif len(text.split()) > _MAX_NAME_WORDS or text.endswith((",", ":")):
                break
            else:
                labelled = any(start <= h.start < end for h in self.hits)
                if first and _name_like(text) and not labelled:
                    out.append(text)
                first = False
            start = end
        return list(dict.fromkeys(out))

    @cached_property
    def _numbers(self) -> list[tuple[int, int, list[float]]]:
        return number_runs(self.document)

    @cached_property
    def _dates(self) -> list[tuple[int, int, str]]:
        return date_spans(self.document) or []


def number_runs(text: str) -> list[tuple[int, int, list[float]]]:
    """``(start, end, readings)`` of each number ``text`` states, in order (readings as
    ``numbers_in``: one, two where the decimal mark stays unknown; a spaced run also reads as
    its parts, after the whole)."""
    runs: dict[tuple[int, int], list[float]] = {}
    for start, end, value in number_spans(text):
        runs.setdefault((start, end), []).append(value)
    return [(start, end, values) for (start, end), values in runs.items()]


def _name_like(text: str) -> bool:
    """A few words with no digit, address or table gap."""
    return (bool(text) and not any(c.isdigit() for c in text) and "@" not in text
            and not re.search(r"\s{3,}|\t", text))  # fmt: skip


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
