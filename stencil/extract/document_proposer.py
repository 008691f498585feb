"""Drafts from the document for speculative decoding: the engine's proposer hook
(``stencil.Proposer``), lent on each request of ``stencil extract`` (``SamplingParams.proposer``)
and reading the document's ``DocumentIndex``. Where the output opens a key's value:

- the next row (tried before prompt lookup): a key written before in a repeated structure (the
  next line item's ``"price":``) takes the text at the same column of the line below its
  previous value (``DocumentIndex.cell_below``; none past a blank line). Prompt lookup would
  propose the previous item's value, which the model almost never repeats;
- the text after a label naming the key: the lexicon's labels of its concepts
  (``Lexicon.concepts_for``: ``total`` -> ``Total due``, ``Gesamtbetrag``), then the key's own
  words as a label (``due_date`` -> ``Due date:``; the whole key first, then its words alone,
  longest first; a long word by its first six letters, so ``organizer`` finds ``Organised``),
  past the label's last words and ``: * = # | >`` (``**Organised by:** PyData``); under a
  table's column header, the cell below.

The chances are the acceptance rates measured on the grounded set of
``bench/engine/latency_bench.py`` with the embedded model (docs/engine.md)."""

from __future__ import annotations

import re

from stencil.constraints import LEXICON, DocumentIndex
from stencil.engine.spec_decode.proposer import Proposal, value_key

ROW = (0.5, 0.9)  # the next row's cell: (first token, each later one)
LABEL = (0.4, 0.9)  # the text after a label naming the key
MAX_LABELS = 3  # labels proposed per value
TAIL_CHARS = 256  # the output's last characters read for the key whose value opens
_WORDS = re.compile(r"[A-Za-z][a-z]*|[0-9]+")
_SKIP = " \t:=*#|>.-–°º"
_HEADER = re.compile(r"[^\d:\n]*\S {2,}\S[^\d:\n]*")  # a table's header row: words, blanks
_REST_OF_LABEL = re.compile(r"[A-Za-z .*()]{0,16}?[:=]")  # ``Organised by:`` past ``Organised``


class DocumentProposer:
    """The proposals of one document (``propose``: the engine's ``Proposer``)."""

    def __init__(self, index: DocumentIndex) -> None:
        self.index = index
        self._labelled: dict[str, list[tuple[int, str]]] = {}  # key -> (where, text after labels)

    def propose(self, output: str, max_chars: int) -> list[Proposal]:
        """The next row's cell and the texts after labels naming the key whose value ``output``
        opens, each at most ``max_chars`` long; [] where no value opens."""
        key = value_key(output[-TAIL_CHARS:])
        if key is None or max_chars <= 0:
            return []
        out = []
        row = self.next_row(output, key)
        if row:
            out.append(Proposal(row[:max_chars], *ROW, lead=True))
        out += [Proposal(text[:max_chars], *LABEL) for _, text in self.labelled(key)]
        return out

    def next_row(self, output: str, key: str) -> str:
        """The cell below the key's previous value in the output ("" where it has none, or it
        or a next row is not found)."""
        values = re.findall(rf'"{re.escape(key)}":\s*"?([^\s",}}\]][^",}}\]\n]*)', output)
        previous = values[-1].strip() if values else ""
        at = self.index.text.rfind(previous) if previous else -1
        return self.index.cell_below(at)[1] if at >= 0 else ""

    def labelled(self, key: str) -> list[tuple[int, str]]:
        """``(where, text)`` of the values labels name ``key``'s value (at most
        ``MAX_LABELS``): the lexicon's labels of its concepts first, then its own words."""
        found = self._labelled.get(key)
        if found is None:
            found = self._labelled[key] = self._find_labelled(key)
        return found

    def _find_labelled(self, key: str) -> list[tuple[int, str]]:
        text = self.index.text
        concepts = LEXICON.concepts_for(key)
        places = [label.value for label in self.index.labelled(concepts or ())]
        out: dict[int, str] = {}
        for start, end in places:
            at = _skip(text, start)
            if at < end:
                out.setdefault(at, text[at:end])
        for pattern in label_patterns(key):
            for match in pattern.finditer(text):
                at, value = _value_after(text, match, self.index)
                if value.strip():
                    out.setdefault(at, value)
        return [(at, value) for at, value in out.items() if value.strip()][:MAX_LABELS]


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


def _value_after(text: str, label: re.Match, index: DocumentIndex) -> tuple[int, str]:
    """Where the value a label names starts, and its line's text from there: past the label's
    last words and ``: * = # | >``, or, for a column's header (no colon after it, blanks
    between columns), the cell below."""
    at = label.end()
    rest = _REST_OF_LABEL.match(text, at)
    if rest is None:
        start, end = text.rfind("\n", 0, at) + 1, text.find("\n", at)
        if _HEADER.fullmatch(text[start : end if end >= 0 else len(text)]):
            return index.cell_below(label.start())
    at = _skip(text, rest.end() if rest else at)
    end = text.find("\n", at)
    return at, text[at : end if end >= 0 else len(text)]


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in _SKIP:
        at += 1
    return at
