"""Tokenizing a prompt that may be far longer than the context, without paying for all of it.

A 15 MB prompt takes seconds to tokenize (on the event loop); once a prefix of it already has more
tokens than the context, the rest cannot matter. ``tokenize_bounded`` tokenizes growing prefixes
(doubling) and stops as soon as one is over the limit, so a hostile prompt costs about as much as
a prompt of twice the context, and a prompt that fits is tokenized once more at most.
"""

from __future__ import annotations

from typing import Any

# A prefix must be this many tokens over the limit to count: cutting the text can split one word
# into a few more tokens than the whole text gives it.
CUT_SLACK = 16


class PromptTooLong(ValueError):
    def __init__(self, at_least: int, limit: int) -> None:
        super().__init__(
            f"the prompt is more than {at_least - CUT_SLACK} tokens; the limit is {limit}"
        )
        self.at_least = at_least
        self.limit = limit


def tokenize_bounded(
    tokenizer: Any, text: str, limit: int, add_special_tokens: bool = False
) -> list[int]:
    """``tokenizer(text).input_ids``, or PromptTooLong once a prefix has more than ``limit``
    (+ slack) tokens."""
    size = max(4 * limit + 1024, 4096)
    while size < len(text):
        n = len(tokenizer(text[:size], add_special_tokens=add_special_tokens).input_ids)
        if n > limit + CUT_SLACK:
            raise PromptTooLong(n, limit)
        size *= 2
    return tokenizer(text, add_special_tokens=add_special_tokens).input_ids
