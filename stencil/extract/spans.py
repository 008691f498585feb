"""Where each extracted value came from: its character offsets in the document (``spans``).

A record's ``spans`` maps the JSON pointer of each value the document states to ``[start,
end]``, offsets in code points (Python ``str`` indices; ``Array.from(text)`` in JavaScript) into
the document's text as ``stencil extract`` read it (HTML as its visible text, PDF as its text
layer), so ``text[start:end]`` is what the value was read from:

- a string: its verbatim occurrence (grounded strings are spans of the document by construction;
  a space where the document wraps its line, ``soft_breaks``, spans the break);
- a number: where the document states it, in the document's spelling (``1.190,00`` -> 1190.0);
- a date: where it is stated in any spelling the readers know (``4. März 2024`` ->
  ``"2024-03-04"``; a slashed ``03/04/2024`` counts for both of its readings).

Booleans, nulls, empty strings and values the document does not state (an enum value named by
other words, a free value) have no span. Where a value occurs more than once, the occurrence is
chosen the same way every time: among the occurrences in the part of the document the question
read, one on a line that names the field (the key's words before the value on its line or the
line above: ``Secretary: Jane Doe``) first, else, inside an array item, the one nearest the
item's first value (a table row stays one row), else the first.
"""

from __future__ import annotations

import re
from typing import Any

from stencil.constraints import date_spans, number_spans, unwrapped

Occurrence = tuple[int, int, str]
"""``(start, end, how)``: how is ``verbatim`` (the value's own text) or ``stated`` (another
spelling of it)."""


class Locator:
    """The places a text (a document, or one window of it at ``offset``) states values."""

    def __init__(self, text: str, offset: int = 0) -> None:
        self.text = text
        self.offset = offset
        self._numbers = number_spans(text)
        self._dates = date_spans(text)
        self._unwrapped, self._origin = unwrapped(text)

    def occurrences(self, leaf: Any) -> list[Occurrence]:
        """Every place (offsets into ``text``) that states ``leaf``, in order."""
        if isinstance(leaf, bool) or leaf is None or leaf == "":
            return []
        if isinstance(leaf, str):
            origin = self._origin
            found = [
                (origin[m.start()], origin[m.start() + len(leaf) - 1] + 1, "verbatim")
                for m in re.finditer(f"(?={re.escape(leaf)})", self._unwrapped)
            ]
            found += [(s, e, "stated") for s, e, iso in self._dates if iso == leaf]
            return sorted(set(found))
        if isinstance(leaf, int | float):
            text = str(leaf)
            found = [
                (s, e, "verbatim" if self.text[s:e] == text else "stated")
                for s, e, v in self._numbers
                if v == leaf
            ]
            return found or [
                (m.start(), m.start() + len(text), "verbatim")
                for m in re.finditer(f"(?<!\\d){re.escape(text)}(?!\\d)", self.text)
            ]
        return []

    def spans(self, key: str, value: Any) -> dict[str, list[int]]:
        """``{pointer: [start, end]}`` (offsets into the whole document) for each stated leaf of
        field ``key``'s ``value``, chosen as the module says."""
        placed = self.place("/" + escape_pointer(key), key_words(key), value)
        return {pointer: [start, end] for pointer, start, end, _ in placed}

    def place(self, root: str, words: list[str], value: Any) -> list[tuple[str, int, int, str]]:
        """``(pointer, start, end, how)`` for each stated leaf of ``value`` (at ``root``),
        offsets into the whole document."""
        out = []
        anchors: dict[str, int] = {}  # array item pointer -> where its first stated leaf is
        for pointer, leaf, item in _leaves(value, root, ""):
            found = self.occurrences(leaf)
            if found:
                start, end, how = self._choose(found, words, anchors.get(item))
                anchors.setdefault(item, start)
                out.append((pointer, start + self.offset, end + self.offset, how))
        return out

    def _choose(self, found: list[Occurrence], words: list[str], near: int | None) -> Occurrence:
        named = [o for o in found if self.names(o[0], words)]
        if named:
            return named[0]
        if near is not None:
            return min(found, key=lambda o: (abs(o[0] - near), o[0]))
        return found[0]

    def names(self, at: int, words: list[str]) -> bool:
        """Whether the text before ``at`` on its line (or the line above) holds every word."""
        if not words:
            return False
        line = self.text.rfind("\n", 0, at)
        above = self.text.rfind("\n", 0, max(line, 0))
        before = self.text[above + 1 : at].lower()
        return all(w in before for w in words)


def key_words(key: str) -> list[str]:
    """A field name's words, lower case: ``next_meeting`` / ``nextMeeting`` -> next, meeting."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", key)
    return [w for w in re.split(r"[\W_]+", spaced.lower()) if len(w) > 1]


def escape_pointer(key: str) -> str:
    """One JSON pointer token (RFC 6901: ``~`` -> ``~0``, ``/`` -> ``~1``)."""
    return key.replace("~", "~0").replace("/", "~1")


def _leaves(value: Any, pointer: str, item: str) -> list[tuple[str, Any, str]]:
    """``(pointer, leaf, item)`` for each leaf; ``item``: the pointer of the innermost array
    item it belongs to ("" outside arrays)."""
    if isinstance(value, dict):
        return [
            leaf
            for key, sub in value.items()
            for leaf in _leaves(sub, f"{pointer}/{escape_pointer(str(key))}", item)
        ]
    if isinstance(value, list):
        return [
            leaf
            for i, sub in enumerate(value)
            for leaf in _leaves(sub, f"{pointer}/{i}", f"{pointer}/{i}")
        ]
    return [(pointer, value, item)]
