"""Text the drafters draft as tokens (forced text, property names), tokenized once: a bounded
cache in front of the tokenizer (a schema's few distinct strings, cleared when it grows past
``MAX_TEXTS``)."""

from __future__ import annotations

from typing import Any

MAX_TEXTS = 4096


class TextTokens:
    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self._encoded: dict[str, list[int]] = {}  # text -> its tokens

    def __call__(self, text: str) -> list[int]:
        tokens = self._encoded.get(text)
        if tokens is None:
            if len(self._encoded) >= MAX_TEXTS:
                self._encoded.clear()
            tokens = self._encoded[text] = self.tokenizer.encode(text, add_special_tokens=False)
        return tokens
