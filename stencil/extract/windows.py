"""Long documents: read in windows that each fit the context, overlapping a little at the seams.

A document that fits the prompt's budget is one window (the whole text). A longer one is split
into consecutive windows of at most ``budget`` tokens, each ending at a line break (else a
space) in its second half, and each after the first starting about ``OVERLAP`` of the window's
tokens before the previous one ends (at a line start where there is one), so a value cut by one
seam is whole in the next window. Every window is a slice of the document, ``text ==
document[start:start + len(text)]``, so offsets found in a window add ``start`` to become the
document's.
"""

from __future__ import annotations

from dataclasses import dataclass

from stencil.extract.prompt import TokenCounter

OVERLAP = 1 / 8
"""The share of a window's tokens read again at the start of the next one."""
MAX_OVERLAP_TOKENS = 128
MAX_TOKEN_CHARS = 16
"""More code points than any token of a real vocabulary covers but in rare runs of one
character (a window of such a run just holds fewer tokens than it could)."""


@dataclass(frozen=True, slots=True)
class Window:
    start: int
    """Where the window starts in the document (a code point offset)."""
    text: str

    @property
    def end(self) -> int:
        return self.start + len(self.text)


def split_windows(document: str, budget: int | None, counter: TokenCounter) -> list[Window]:
    """The windows of ``document`` for prompts of ``budget`` document tokens (None: no limit)."""
    if budget is None or counter.count(document) <= budget:
        return [Window(0, document)]
    overlap = min(MAX_OVERLAP_TOKENS, int(budget * OVERLAP))
    out: list[Window] = []
    start = 0
    while True:
        rest = document[start:]
        fit = _fit(rest, budget, counter)
        if fit >= len(rest):
            out.append(Window(start, rest))
            return out
        end = start + _seam(rest, fit)
        out.append(Window(start, document[start:end]))
        back = int((end - start) * overlap / max(1, counter.count(document[start:end])))
        start = max(start + 1, _line_start(document, end - back, end))


def _fit(text: str, budget: int, counter: TokenCounter) -> int:
    """The longest prefix of ``text`` (in code points) that is at most ``budget`` tokens (of
    its first ``MAX_TOKEN_CHARS * budget`` code points: a long document is not tokenized whole
    for every window)."""
    head = text[: MAX_TOKEN_CHARS * budget]
    n = min(len(head), len(counter.cut(head, budget)))
    if n >= len(head) and counter.count(head) <= budget:
        return len(head)
    while n > 1 and counter.count(head[:n]) > budget:
        n -= max(1, n // 32)
    return max(1, n)


def _seam(text: str, fit: int) -> int:
    """Where a window of ``text[:fit]`` ends: after its last line break in the second half,
    else after its last space there, else at ``fit``."""
    for sep in ("\n", " "):
        at = text.rfind(sep, fit // 2, fit)
        if at >= 0:
            return at + 1
    return fit


def _line_start(document: str, at: int, end: int) -> int:
    """The first line start (else word start) in ``document[at:end]``; ``at`` when none."""
    for sep in ("\n", " "):
        found = document.find(sep, at, end - 1)
        if found >= 0:
            return found + 1
    return at
