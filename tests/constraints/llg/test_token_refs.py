"""Grammars that name tokens (``<[id]>``): only special tokens may be named, because llguidance
undoes a token by its byte length (``llg/token_refs.py``). Oracle: llguidance's own matcher,
driven as the engine drives it (mask, accept, roll back, accept again), on SmolLM2's real
tokenizer with Phi-4-mini's ``functools`` added as one plain token, as some vocabularies have it."""

from __future__ import annotations

import pytest

from stencil.constraints import (
    Constraint,
    ConstraintCompiler,
    InvalidGrammarError,
    TokenVocab,
    allocate_token_bitmask,
    special_token_ids,
)
from stencil.constraints.llg.token_refs import token_refs

PLAIN = ["functools", "fun_tools"]  # added, not special (and not written like <...>)
SPECIAL = ["<|tool|>"]
ANGLED = ["<tool_call>"]  # added as plain, but llguidance treats <...> added tokens as special


@pytest.fixture(scope="module")
def added(smol_tokenizer):
    from transformers import AddedToken, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(smol_tokenizer.name_or_path)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in PLAIN + ANGLED])
    tok.add_special_tokens({"additional_special_tokens": SPECIAL})
    vocab = TokenVocab.from_hf(tok)
    return tok, vocab, ConstraintCompiler(vocab)


@pytest.mark.parametrize(
    ("lark", "ids"),
    [
        ('start: <[5]> "x" <[7]> <[5]>', [5, 7]),
        ('start: "<[5]>" /<\\[6\\]>/ <[8]>', [8]),  # inside a string or a regex: not a reference
        ('start: "a\\"<[5]>" b\nb: "x"', []),
        ("start: <[1-9]> | <[^5]>", []),  # ranges and negations name no single token
    ],
)
def test_token_refs(lark, ids):
    assert token_refs(lark) == ids


def test_special_token_ids_are_llguidance_s(added):
    tok, vocab, _ = added
    ids = {t: tok.convert_tokens_to_ids(t) for t in PLAIN + SPECIAL + ANGLED}
    marked = special_token_ids(tok, ids.values())
    assert marked == {i for i in ids.values() if vocab.is_special(i)}
    assert marked == {ids[t] for t in SPECIAL + ANGLED}


@pytest.mark.parametrize("name", PLAIN)
def test_naming_a_plain_token_is_a_clear_error(added, name):
    tok, _, compiler = added
    token_id = tok.convert_tokens_to_ids(name)
    with pytest.raises(InvalidGrammarError, match=rf"<\[{token_id}\]> names token .*{name}"):
        compiler.compile(Constraint.grammar(f'start: <[{token_id}]> "[" /[a-z]+/ "]"'))


def _undo_and_redo(compiler, vocab, lark: str, first: int, then: list[int]) -> None:
    """The engine's order: the first mask, the token, what follows; undo all, then again."""
    m = compiler.compile(Constraint.grammar(lark)).new_matcher()
    mask = allocate_token_bitmask(1, vocab.vocab_size)
    for _ in range(2):
        m.fill_next_token_bitmask(mask)
        assert m.jump_forward_tokens()[:1] == [first]
        for t in [first, *then]:
            assert m.accept_token(t), m.error()
        m.rollback(1 + len(then))
        assert m.error() is None and m.num_tokens == 0


@pytest.mark.parametrize("name", PLAIN + SPECIAL + ANGLED)
def test_a_call_token_rolls_back(added, name):
    """A special token named ``<[id]>``, a plain one written as its text: both undo cleanly."""
    tok, vocab, compiler = added
    token_id = tok.convert_tokens_to_ids(name)
    piece = f"<[{token_id}]>" if vocab.is_special(token_id) else f'"{name}"'
    then = tok.encode("[abc]", add_special_tokens=False)
    _undo_and_redo(compiler, vocab, f'start: {piece} "[" /[a-z]+/ "]"', token_id, then)
