"""Prompt lookup on text: the output's last characters found in the prompt's text, and what
follows them there, tokenized, proposed. It finds a copy whose tokens differ from the prompt's
(a value's first word right after its opening quote has no leading space, so its token is not
the document's) where token n-grams (``ngram_proposer.py``) find nothing."""

from __future__ import annotations

from typing import Any

TAIL_TOKENS = 8  # the output tokens whose text is looked up
CHARS_PER_TOKEN = 8  # text taken after a match, per token wanted


class TextProposer:
    def __init__(self, tokenizer: Any, min_chars: int = 4, max_chars: int = 32) -> None:
        self.tokenizer = tokenizer
        self.min_chars = min_chars
        self.max_chars = max_chars

    def propose(self, prompt_text: str, context: list[int], k: int) -> list[int]:
        """Up to ``k`` tokens of the text that follows the first occurrence in ``prompt_text``
        of the longest suffix (``max_chars`` down to ``min_chars`` characters) of the text of
        ``context``'s last tokens; [] where none occurs."""
        if k <= 0:
            return []
        tail = self.tokenizer.decode(context[-TAIL_TOKENS:])
        for n in range(min(len(tail), self.max_chars), self.min_chars - 1, -1):
            at = prompt_text.find(tail[-n:])
            if at >= 0:
                follow = prompt_text[at + n : at + n + CHARS_PER_TOKEN * k]
                return self.tokenizer.encode(follow, add_special_tokens=False)[:k] if follow else []
        return []
