"""Prompts as token ids, bounded by the context: a chat prompt's text, or a completion's
prompts (strings or token ids); longer than the context is a 400 naming the field.

Tokenizing a prompt that may be far longer than the context does not pay for all of it.

A 15 MB prompt takes seconds to tokenize (on the event loop); once a prefix of it already has more
tokens than the context, the rest cannot matter. ``tokenize_bounded`` tokenizes growing prefixes
(doubling) and stops as soon as one is over the limit, so a hostile prompt costs about as much as
a prompt of twice the context, and a prompt that fits is tokenized once more at most.
"""

from __future__ import annotations

from typing import Any

from stencil.api.errors import bad_request

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


def prompt_ids(
    tokenizer: Any, text: str, max_len: int, param: str, special: bool = False
) -> list[int]:
    """Token ids of ``text``; a 400 naming ``param`` once it is sure to exceed the context
    (without tokenizing all of a huge prompt)."""
    try:
        return tokenize_bounded(tokenizer, text, max_len, special)
    except PromptTooLong as e:
        raise bad_request(f"{e} (this model's context)", param) from None


def completion_prompts(
    prompt: Any, tokenizer: Any, max_len: int, vocab_size: int
) -> list[tuple[list[int], str]]:
    """A completion request's ``prompt`` (a string, token ids, or a list of either) as
    ``(token ids, text)`` per prompt."""
    if isinstance(prompt, str):
        prompt = [prompt]
    if not prompt:
        raise bad_request("prompt must not be empty", "prompt")
    if all(isinstance(p, int) for p in prompt):
        prompt = [prompt]
    out = []
    for p in prompt:
        if isinstance(p, str):
            out.append((prompt_ids(tokenizer, p, max_len, "prompt", True), p))
            continue
        bad = [i for i in p if not 0 <= i < vocab_size]
        if bad:
            raise bad_request(f"prompt token ids {bad[:5]} are outside the vocabulary", "prompt")
        out.append((list(p), tokenizer.decode(p)))
    if any(not ids for ids, _ in out):
        raise bad_request("prompt must not be empty", "prompt")
    return out
