"""How outputs split short texts into tokens (``","`` as ``",`` ``"``, ``":"`` as ``":`` ``"``).

The drafters write structure (a value's closing ``","``, the ``":"`` after a key) as the
tokenizer splits it, which is not always how the model writes it. A draft spelled the other way
is refused at its first token and costs a step. Nothing here knows a tokenizer or a model: the
splits are learned from the outputs as they are written, for any vocabulary. ``Spelling``
records, for each text of up to ``MAX_CHARS`` characters that ended a run of up to
``MAX_TOKENS`` whole output tokens, the latest such run of this output (``spelled``, one per
sequence) and the run of its first occurrence in the latest output that wrote it (``first``,
shared by all sequences); a model that writes its texts as its tokenizer splits them drafts as
without it. What it saves, per model (decode steps with structure drafted as spelled / as
tokenized; ``python -m bench.engine.spelling_bench``, docs/engine.md): the embedded SmolLM2
(which writes ``","`` whole in one record and split in the next, and the ``":"`` after an
output's first key split) 188 / 203 on the grounded set and 399 / 407 on ``stencil extract``'s
questions; Qwen2.5-Coder-0.5B 189 / 193 and 375 / 379."""

from __future__ import annotations

from typing import Any

MAX_CHARS = 8
MAX_TOKENS = 3
MAX_ENTRIES = 65536  # token texts and first spellings kept (each cleared when it grows past)


class Spelling:
    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.first: dict[str, list[int]] = {}  # text -> its run where an output first wrote it
        self._pieces: dict[int, str] = {}  # token id -> its text
        # a token decoded after an anchor keeps the leading blank a lone decode may drop
        self._anchor = tokenizer.encode("a", add_special_tokens=False)[-1:]
        self._anchor_chars = len(tokenizer.decode(self._anchor))

    def update(
        self, spelled: dict[str, list[int]], tokens: list[int], start: int, first: int
    ) -> None:
        """Record in ``spelled`` the runs of ``tokens[first:]`` (the output) that end at
        ``tokens[start:]`` (the tokens since the last update); a text the output writes for the
        first time also in ``first``."""
        if len(self.first) >= MAX_ENTRIES:
            self.first.clear()
        for end in range(max(start, first), len(tokens)):
            text = ""
            for begin in range(end, max(end - MAX_TOKENS, first - 1), -1):
                text = self.piece(tokens[begin]) + text
                if len(text) > MAX_CHARS:
                    break
                run = tokens[begin : end + 1]
                if text not in spelled:
                    self.first[text] = run
                spelled[text] = run

    def first_time(self, text: str, spelled: dict[str, list[int]]) -> list[int] | None:
        """How the latest output first wrote ``text``, where this output has not written it
        yet (None otherwise, or where no output has)."""
        return None if text in spelled else self.first.get(text)

    def piece(self, token: int) -> str:
        """``token``'s text."""
        piece = self._pieces.get(token)
        if piece is None:
            if len(self._pieces) >= MAX_ENTRIES:
                self._pieces.clear()
            text = self.tokenizer.decode(self._anchor + [token])
            piece = self._pieces[token] = text[self._anchor_chars :]
        return piece
