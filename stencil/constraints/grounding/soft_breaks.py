"""Soft line breaks: where a text was wrapped to a width inside a sentence (a plain-text mail, a
title set on two lines, a PDF's text layer), so a value runs from one line into the next
(``se reúnen en el portal del`` / ``edificio``, a title's second line ``na chlazení bytových
domů``). A model copies such a value with a space, as it reads it; grounding lets it (each soft
break, with the line's trailing and the next line's leading blanks, is one space in the text its
spans are cut from), and ``spans`` place the value back on the document's two lines.

A break is soft where the next line goes on with a lowercase word that is no label (``email:``)
and the line before holds text that does not end with ``:``. A break before a capital, a digit
or a bullet is kept: it may end a table row, a heading or an address line, where a value ends.
"""

from __future__ import annotations

import re

_BREAK = re.compile(r"[ \t]*\r?\n[ \t]*(?=[^\W\d_])")
_LABEL = re.compile(r"[^\W\d_][\w .'-]{0,30}:(?:\s|$)")


def soft_breaks(text: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` of each soft break in ``text`` (the blanks around it included)."""
    found = []
    for m in _BREAK.finditer(text):
        start, end = m.span()
        before = text[text.rfind("\n", 0, start) + 1 : start]
        after = text[end : (text.find("\n", end) + 1 or len(text) + 1) - 1]
        if text[end].islower() and before.strip() and not before.endswith(":"):
            if not _LABEL.match(after):
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
