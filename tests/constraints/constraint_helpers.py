"""Helpers for constraint tests: feed texts through matchers, walk masks, canonical JSON."""

from __future__ import annotations

import functools
import json
import random
import re
from dataclasses import dataclass
from typing import Any

import torch

from stencil.constraints import (
    CompiledConstraint,
    Matcher,
    TokenVocab,
    allocate_token_bitmask,
    bitmask_to_bool,
)


def accepts_tokens(matcher: Matcher, tokens: list[int], eos: int) -> bool:
    """All tokens accepted and then EOS accepted (a complete match)."""
    return all(matcher.accept_token(t) for t in tokens) and matcher.accept_token(eos)


def accepts_text(compiled: CompiledConstraint, tokenizer: Any, text: str) -> bool:
    tokens = tokenizer.encode(text, add_special_tokens=False)
    return accepts_tokens(compiled.new_matcher(), tokens, compiled.vocab.eos_token_ids[0])


def random_tokenization(tokenizer: Any, text: str, rng: random.Random) -> list[int]:
    """A non-canonical tokenization: cut the text at random points, tokenize the pieces."""
    cuts = sorted(rng.sample(range(1, len(text)), k=min(len(text) - 1, rng.randint(1, 6))))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    return [t for p in pieces for t in tokenizer.encode(p, add_special_tokens=False)]


def allowed(matcher: Matcher, vocab: TokenVocab) -> list[int]:
    mask = allocate_token_bitmask(1, vocab.vocab_size)
    matcher.fill_next_token_bitmask(mask, 0)
    return bitmask_to_bool(mask, vocab.vocab_size)[0].nonzero().flatten().tolist()


@dataclass
class Walk:
    text: bytes
    outcome: str  # "done" (EOS accepted), "error" (no continuation), "length"
    error: str | None = None


def walk(compiled: CompiledConstraint, rng: random.Random, max_tokens: int = 120) -> Walk:
    """Temperature-1.0-like walk: uniform over allowed tokens, short ones preferred (so walks
    finish); every allowed token must be accepted and every refused one stays refused."""
    vocab = compiled.vocab
    matcher = compiled.new_matcher()
    short_ok = _token_lengths(vocab) <= 2
    eos = set(vocab.eos_token_ids)
    mask = allocate_token_bitmask(1, vocab.vocab_size)
    out: list[int] = []
    for _ in range(max_tokens):
        matcher.fill_next_token_bitmask(mask, 0)
        bits = bitmask_to_bool(mask, vocab.vocab_size)[0]
        if not bits.any():
            assert matcher.error(), "an empty mask needs an error message"
            assert not matcher.accept_token(next(iter(eos)))
            return Walk(vocab.decode_bytes(out), "error", matcher.error())
        short = (bits & short_ok).nonzero().flatten()
        pool = short if len(short) and rng.random() < 0.8 else bits.nonzero().flatten()
        token = int(pool[rng.randrange(len(pool))])
        eos_allowed = [t for t in eos if bits[t]]
        if eos_allowed and rng.random() < 0.3:
            token = eos_allowed[0]
        assert matcher.accept_token(token), f"mask allowed {token} but matcher rejected it"
        if token in eos:
            return Walk(vocab.decode_bytes(out), "done")
        out.append(token)
    return Walk(vocab.decode_bytes(out), "length")


def random_walk(
    compiled: CompiledConstraint, rng: random.Random, max_tokens: int = 60
) -> tuple[bytes, bool]:
    """``walk`` as ``(bytes, ended_with_eos)``: a walk that a decode-time check leaves without
    continuation ends unfinished."""
    result = walk(compiled, rng, max_tokens)
    return result.text, result.outcome == "done"


@functools.lru_cache(maxsize=4)
def _token_lengths(vocab: TokenVocab) -> torch.Tensor:
    """Byte length per token (padding: 0)."""
    return torch.tensor([len(vocab.token_bytes(t)) for t in range(vocab.vocab_size)])


def canonical(value: Any) -> Any:
    """Integral floats as ints (equal JSON values; ``1.0`` is an integer in JSON Schema)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e300:
        return int(value)
    if isinstance(value, list):
        return [canonical(v) for v in value]
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in value.items()}
    return value


def dumps(value: Any) -> str:
    return json.dumps(canonical(value), ensure_ascii=False)


def schema_ordered(value: Any, schema: Any, root: Any, depth: int = 0) -> Any:
    """``value`` with object keys in the order its schema declares them (best effort)."""
    if depth > 20 or not isinstance(schema, dict):
        return value
    schema = _deref(schema, root)
    if not isinstance(schema, dict):
        return value
    const = schema.get("const")
    if isinstance(const, dict) and _same(const, value):
        return const
    for key in ("allOf", "anyOf", "oneOf"):
        for sub in schema.get(key, []):
            sub = _deref(sub, root)
            if isinstance(sub, dict) and ("properties" in sub or "items" in sub):
                schema = {**sub, **schema}
                break
    if isinstance(value, dict):
        props = schema.get("properties", {})
        props = props if isinstance(props, dict) else {}
        order = [k for k in props if k in value] + [k for k in value if k not in props]
        return {k: schema_ordered(value[k], _child(schema, k), root, depth + 1) for k in order}
    if isinstance(value, list):
        prefix = schema.get("prefixItems", [])
        items = schema.get("items", {})
        prefix, items = (items, {}) if isinstance(items, list) else (prefix, items)
        return [
            schema_ordered(v, prefix[i] if i < len(prefix) else items, root, depth + 1)
            for i, v in enumerate(value)
        ]
    return value


def _child(schema: dict, key: str) -> Any:
    """The subschema a property's value answers to: ``properties``, a matching
    ``patternProperties`` (Python ``re``: best effort), else ``additionalProperties``."""
    props = schema.get("properties", {})
    if isinstance(props, dict) and key in props:
        return props[key]
    patterns = schema.get("patternProperties", {})
    for pattern, sub in patterns.items() if isinstance(patterns, dict) else ():
        try:
            if re.search(pattern, key):
                return sub
        except re.error:
            continue
    return schema.get("additionalProperties", {})


def _same(a: Any, b: Any) -> bool:
    """JSON equality (``False`` is not ``0``)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _deref(schema: Any, root: Any) -> Any:
    for _ in range(10):
        if not isinstance(schema, dict) or not str(schema.get("$ref", "")).startswith("#"):
            return schema
        node = root
        for part in schema["$ref"][1:].split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            try:
                node = node[int(part)] if isinstance(node, list) else node[part]
            except (KeyError, IndexError, ValueError, TypeError):
                return {}
        schema = node
    return schema


def bits_of(mask: torch.Tensor, vocab_size: int) -> torch.Tensor:
    return bitmask_to_bool(mask, vocab_size)
