"""The shared benchmark workload: seeded prompts of 32-256 tokens, outputs of 16-256 tokens."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Item:
    prompt_ids: list[int]
    max_tokens: int


def make_workload(
    tokenizer, n: int = 64, seed: int = 0, prompt_range=(32, 256), output_range=(16, 256)
) -> list[Item]:
    """Prompts cut from a fixed English text (real tokens, not random ids)."""
    rng = random.Random(seed)
    words = (
        "the quick brown fox jumps over a lazy dog while seven wizards quietly judge "
        "boxing matches in the old town hall and every student writes a short report about "
        "invoices dates names and amounts for the quarterly meeting of the committee"
    ).split()
    items = []
    for _ in range(n):
        plen = rng.randint(*prompt_range)
        text = " ".join(rng.choice(words) for _ in range(plen * 2))
        ids = tokenizer(text, add_special_tokens=False).input_ids[:plen]
        items.append(Item(ids, rng.randint(*output_range)))
    return items


def outside_prompt(ids: list[int]) -> list[int]:
    """A warm-up prompt as long as ``ids`` (at most 64 tokens) that shares no prefix block with
    the workload: token ids 100-199, which the workload's text prompts start with only by chance.
    Warming on it leaves both engines' prefix caches without any workload prefix."""
    return [100 + (t % 100) for t in reversed(ids[:64])]
