"""Drafts for a value's first tokens: the document text after a label that names the key just
written (``"due_date":"`` -> the text after ``Due date:``).

Prompt lookup finds the rest of a value copied from the document once its first token is out,
but not which span the model starts copying. A document often labels its fields (``Issue date:``,
``**Organised by:**``, ``Email -``): the key's words (``due_date`` -> due, date; a long word by
its first six letters, so ``organizer`` finds ``Organised``) are looked up in the document, the
whole key first, then its words alone, longest first; the text after each label (past the
label's last words and its colon, ``: * = # | >`` and blanks, to the end of its line; under a
table's column header, the cell below) is a candidate, tokenized. The drafter takes the first
candidate the matcher accepts (a grounded value only admits document spans); the verifier
decides."""

from __future__ import annotations

import re
from typing import Any

MAX_CANDIDATES = 3  # labels tried per value
CHARS_PER_TOKEN = 8  # text taken after a label, per token wanted
_VALUE_START = re.compile(r'"((?:[^"\\\n]|\\.)+)":"?$')  # a key, then its value opens
_WORDS = re.compile(r"[A-Za-z][a-z]*|[0-9]+")
_SKIP = " \t:=*#|>"
_HEADER = re.compile(r"[^\d:\n]*\S {2,}\S[^\d:\n]*")  # a table's header row: words, blanks
_CELL_END = re.compile(r"\s{2,}|\t|$")  # a table cell ends at a run of blanks
_REST_OF_LABEL = re.compile(r"[A-Za-z .*()]{0,16}?[:=]")  # ``Organised by:`` past ``Organised``


class LabelProposer:
    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self._patterns: dict[str, list[re.Pattern]] = {}  # key -> its label patterns (bounded)

    def propose(self, document: str, tail: str, k: int) -> list[list[int]]:
        """Candidate drafts (each up to ``k`` tokens) for the value that ``tail`` (the output's
        last text) opens, from the labels in ``document`` that name its key; [] where ``tail``
        does not end at a value's start or no label names the key."""
        key = value_key(tail)
        if key is None or k <= 0:
            return []
        out: list[list[int]] = []
        seen: set[int] = set()
        for pattern in self._labels(key):
            for match in pattern.finditer(document):
                at, text = _value_after(document, match)
                text = text[: CHARS_PER_TOKEN * k]
                if at in seen or not text.strip():
                    continue
                seen.add(at)
                out.append(self.tokenizer.encode(text, add_special_tokens=False)[:k])
                if len(out) >= MAX_CANDIDATES:
                    return out
        return out

    def _labels(self, key: str) -> list[re.Pattern]:
        patterns = self._patterns.get(key)
        if patterns is None:
            if len(self._patterns) >= 1024:
                self._patterns.clear()
            patterns = self._patterns[key] = label_patterns(key)
        return patterns


def _value_after(document: str, label: re.Match) -> tuple[int, str]:
    """Where the value a label names starts in ``document``, and its line's text from there:
    past the label's last words and ``: * = # | >`` (``**Organised by:** PyData``), or, for a
    column's header (no colon after it, blanks between columns), the cell below
    (``cell_below``)."""
    at = label.end()
    rest = _REST_OF_LABEL.match(document, at)
    if rest is None:
        start, end = document.rfind("\n", 0, at) + 1, document.find("\n", at)
        if _HEADER.fullmatch(document[start : end if end >= 0 else len(document)]):
            return cell_below(document, label.start())
    at = rest.end() if rest else at
    while at < len(document) and document[at] in _SKIP:
        at += 1
    end = document.find("\n", at)
    return at, document[at : end if end >= 0 else len(document)]


def value_key(tail: str) -> str | None:
    """The key whose value ``tail`` ends by opening (``"key":`` or ``"key":"``), or None."""
    found = _VALUE_START.search(tail)
    return found.group(1) if found else None


def label_patterns(key: str) -> list[re.Pattern]:
    """Case-insensitive patterns for the labels that may name ``key``: all its words in order,
    then each word of three or more letters alone, longest first."""
    words = [w.lower() for w in _WORDS.findall(key)]
    stems = [re.escape(w[:6]) + r"\w*" for w in words]
    alone = sorted({w for w in words if len(w) >= 3}, key=len, reverse=True)
    texts = ([r"[\W_]*".join(stems)] if len(words) > 1 else []) + [
        re.escape(w[:6]) + r"\w*" for w in alone
    ]
    return [re.compile(r"\b" + t, re.IGNORECASE) for t in texts]


def cell_below(document: str, at: int) -> tuple[int, str]:
    """Where the next line's text at the column of ``document[at]`` starts (or the start of
    the word there), and that text up to a run of two blanks or the line's end ((-1, "") past
    the last line)."""
    column = at - (document.rfind("\n", 0, at) + 1)
    start = document.find("\n", at) + 1
    if start <= 0:
        return -1, ""
    end = document.find("\n", start)
    line = document[start : end if end >= 0 else len(document)]  # the next row
    while 0 < column < len(line) and not line[column - 1].isspace():
        column -= 1  # a right-aligned cell starts left of its header
    cell = line[column:] if len(line) > column else ""
    blanks = len(cell) - len(cell.lstrip())
    cell = cell[blanks:]
    return start + column + blanks, cell[: _CELL_END.search(cell).start()]
