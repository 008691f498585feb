"""How a sequence's output so far split short texts into tokens (``","`` as ``",`` ``"``).

The drafters write structure (a value's closing ``","``, the ``":"`` after a key) as the
tokenizer splits it, which is not always how the model writes it: the embedded model writes
``","`` as one token in one record and as ``",`` ``"`` in the next, and keeps to its choice
within an output. A draft spelled the other way is refused at its first token and costs a step.
``Spelling`` records, for each text of up to ``MAX_CHARS`` characters that ended a run of up to
``MAX_TOKENS`` whole output tokens, the latest such run; the drafters write that text the same
way again."""

from __future__ import annotations

from typing import Any

MAX_CHARS = 8
MAX_TOKENS = 3
MAX_PIECES = 65536  # token texts kept (cleared when it grows past)


class Spelling:
    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self._pieces: dict[int, str] = {}  # token id -> its text
        # a token decoded after an anchor keeps the leading blank a lone decode may drop
        self._anchor = tokenizer.encode("a", add_special_tokens=False)[-1:]
        self._anchor_chars = len(tokenizer.decode(self._anchor))

    def update(
        self, spelled: dict[str, list[int]], tokens: list[int], start: int, first: int
    ) -> None:
        """Record in ``spelled`` the runs of ``tokens[first:]`` (the output) that end at
        ``tokens[start:]`` (the tokens since the last update)."""
        for end in range(max(start, first), len(tokens)):
            text = ""
            for begin in range(end, max(end - MAX_TOKENS, first - 1), -1):
                text = self.piece(tokens[begin]) + text
                if len(text) > MAX_CHARS:
                    break
                spelled[text] = tokens[begin : end + 1]

    def piece(self, token: int) -> str:
        """``token``'s text."""
        piece = self._pieces.get(token)
        if piece is None:
            if len(self._pieces) >= MAX_PIECES:
                self._pieces.clear()
            text = self.tokenizer.decode(self._anchor + [token])
            piece = self._pieces[token] = text[self._anchor_chars :]
        return piece
