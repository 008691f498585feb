"""Soft line breaks: where a text was wrapped to a width inside a sentence (a plain-text mail, a
title set on two lines, a PDF's text layer), so a value runs from one line into the next
(``se reúnen en el portal del`` / ``edificio``, a title's second line ``na chlazení bytových
domů``). A model copies such a value with a space, as it reads it; grounding lets it (each soft
break, with the line's trailing and the next line's leading blanks, is one space in the text its
spans are cut from), and ``spans`` place the value back on the document's two lines.

A break is soft where a line of running text (``MIN_LINE`` characters or more, ending with a
letter or a comma) goes on with a lowercase word that is neither a label (``email:``) nor an
abbreviation or a code (``tel.``, ``arXiv:2607``). Any other break is kept: before a capital, a
digit or a bullet, after a short line or a bracket, it may end a table row, a heading, a list's
item or an address line, where a value ends.
"""

from __future__ import annotations

import re

MIN_LINE = 40
_BREAK = re.compile(r"(?<=[^\W\d_]|,)[ \t]*\r?\n[ \t]*(?=[^\W\d_])")
_NOT_GOING_ON = re.compile(r"[^\W\d_][\w .'-]{0,30}:(?:\s|$)|\S*:|[^\W\d_]{1,4}\.(?!\S)")
"""A label (``email: ...``), a word with a colon (``arXiv:2607``), an abbreviation (``tel.``)."""


def soft_breaks(text: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` of each soft break in ``text`` (the blanks around it included)."""
    found = []
    for m in _BREAK.finditer(text):
        start, end = m.span()
        line = text[text.rfind("\n", 0, start) + 1 : start].strip()
        if len(line) >= MIN_LINE and text[end].islower() and not _NOT_GOING_ON.match(text, end):
            found.append((start, end))
    return found


def unwrapped(text: str) -> tuple[str, list[int]]:
    """``text`` with each soft break one space, and for each of its offsets (and its end) the
    offset in ``text`` it comes from."""
    parts, origin, at = [], [], 0
    for start, end in soft_breaks(text):
        parts += [text[at:start], " "]
        origin += [*range(at, start), start]
        at = end
    parts.append(text[at:])
    origin += [*range(at, len(text) + 1)]
    return "".join(parts), origin
