"""What one document states, read once, by the lexicon's rules: its labels and the value after
each (``Total:``, ``Gesamtbetrag``, ``Bill to:``, ``Fällig am``), its numbers in its own locale,
its dates, times and currencies (``stated``), and its table cells (the text below a column's
header). Grounding (``translation``), the field planner, the grounding check of a record and the
drafts of ``stencil extract`` all read a document through this one index."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from . import stated
from .lexicon import LEXICON

_PUNCT = " \t:.-–#°º|"
_CELL_END = re.compile(r"\s{2,}|\t|$")  # a table cell ends at a run of blanks


@dataclass(frozen=True, slots=True)
class Label:
    concepts: frozenset[str]
    """The lexicon's concepts the printed label names (``Total due``: total)."""
    start: int
    """Where the label starts in the document."""
    value: tuple[int, int]
    """The text after it: to the next label of another concept on the line, or the next line."""


class DocumentIndex:
    """One document's labels, values and cells; each part is read on first use."""

    def __init__(self, text: str) -> None:
        self.text = text

    @cached_property
    def labels(self) -> tuple[Label, ...]:
        """Every place the document prints a label of the lexicon, in order."""
        return tuple(_labels(self.text))

    @cached_property
    def label_lines(self) -> frozenset[int]:
        """The line numbers (from 0) that hold a label: a date's label only on a line that
        states a date (``Data transfer  $87.00`` is a row, though ``data`` is a date's label)."""
        lines = self.text.split("\n")
        at = [(self.text.count("\n", 0, label.start), label) for label in self.labels]
        return frozenset(
            i
            for i, label in at
            if not label.concepts <= LEXICON.dated or stated.date_spans(lines[i])
        )

    def labelled(self, concepts: tuple[str, ...]) -> list[Label]:
        """The labels of the first of ``concepts`` the document prints (none: ``[]``)."""
        for concept in concepts:
            found = [label for label in self.labels if concept in label.concepts]
            if found:
                return found
        return []

    @cached_property
    def number_spans(self) -> list[tuple[int, int, float]]:
        """``(start, end, reading)`` of every number (``stated.number_spans``)."""
        return stated.number_spans(self.text)

    @cached_property
    def date_spans(self) -> list[tuple[int, int, str]]:
        """``(start, end, iso)`` of every date (``stated.date_spans``)."""
        return stated.date_spans(self.text)

    @property
    def number_mentions(self) -> list[float]:
        """Every reading of every number, repeats kept."""
        return [value for _, _, value in self.number_spans]

    @property
    def date_mentions(self) -> list[str]:
        """Every reading of every date (ISO), repeats kept."""
        return [iso for _, _, iso in self.date_spans]

    @property
    def numbers(self) -> list[float]:
        """The numbers stated, each once, in order."""
        return list(dict.fromkeys(self.number_mentions))

    @property
    def dates(self) -> list[str]:
        """The dates stated (ISO), each once, in order."""
        return list(dict.fromkeys(self.date_mentions))

    @cached_property
    def readings(self) -> tuple[str, ...]:
        """The dates (ISO) and times of day (``HH:MM``) stated (``stated.readings_in``)."""
        return (*self.dates, *stated.times_in(self.text))

    @cached_property
    def currencies(self) -> list[str]:
        """The ISO 4217 codes of the currencies stated by code or sign, each once, in order."""
        return stated.currencies_in(self.text)

    def cell_below(self, at: int) -> tuple[int, str]:
        """Where the next line's text at the column of ``text[at]`` starts (or the start of
        the word there), and that text up to a run of two blanks or the line's end ((-1, "")
        past the last line): the cell below a column's header or an earlier row's cell."""
        text = self.text
        column = at - (text.rfind("\n", 0, at) + 1)
        start = text.find("\n", at) + 1
        if start <= 0:
            return -1, ""
        end = text.find("\n", start)
        line = text[start : end if end >= 0 else len(text)]  # the next row
        while 0 < column < len(line) and not line[column - 1].isspace():
            column -= 1  # a right-aligned cell starts left of its header
        cell = line[column:] if len(line) > column else ""
        blanks = len(cell) - len(cell.lstrip())
        cell = cell[blanks:]
        return start + column + blanks, cell[: _CELL_END.search(cell).start()]


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
    ``stated.numbers_in``: one, two where the decimal mark stays unknown; a spaced run also
    reads as its parts, after the whole)."""
    runs: dict[tuple[int, int], list[float]] = {}
    for start, end, value in stated.number_spans(text):
        runs.setdefault((start, end), []).append(value)
    return [(start, end, values) for (start, end), values in runs.items()]


def _pattern() -> re.Pattern[str]:
    words = sorted({w for ws in LEXICON.labels.values() for w in ws}, key=len, reverse=True)
    alts = [re.escape(w[:-1]) + r"\s*:" if w.endswith(":") else re.escape(w) for w in words]
    alts = [a.replace(r"\ ", r"\s+") for a in alts]
    return re.compile(rf"(?<![\w./-])(?:{'|'.join(alts)})(?![\w/-])", re.IGNORECASE)


def _concepts(label: str) -> frozenset[str]:
    key = re.sub(r"\s*:$", ":", " ".join(label.lower().split()))
    return frozenset(
        c for c, words in LEXICON.labels.items() if key in words or key.rstrip(":") in words
    )


_LABEL = _pattern()  # every label of the lexicon, longest first


def _labels(document: str) -> list[Label]:
    found = [(m.start(), m.end(), _concepts(m.group())) for m in _LABEL.finditer(document)]
    labels = []
    for i, (start, end, concepts) in enumerate(found):
        line_end = document.find("\n", end)
        line_end = len(document) if line_end < 0 else line_end
        stop = next(
            (s for s, _, c in found[i + 1 :] if s < line_end and not c & concepts), line_end
        )
        value = (end, stop)
        if not document[end:stop].strip(_PUNCT):  # the value is on the next line
            rest = document[line_end:].lstrip("\n")
            nxt = len(document) - len(rest)
            value = (nxt, nxt + len(rest.split("\n", 1)[0]))
        labels.append(Label(concepts, start, value))
    return labels
