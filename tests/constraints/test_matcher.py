"""Matcher semantics: accept/reject, EOS rules, rollback, reset, jump-forward, bitmasks."""

from __future__ import annotations

import threading
import time

import pytest
import torch
from constraint_helpers import accepts_text, allowed

from stencil.constraints import (
    CompileTimeoutError,
    Constraint,
    ConstraintCompiler,
    InvalidGrammarError,
    InvalidSchemaError,
    allocate_token_bitmask,
    bitmask_to_bool,
)

OBJ = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


def _encode(tok, text):
    return tok.encode(text, add_special_tokens=False)


def test_only_eos_after_complete_match(smol_compiler, smol_tokenizer, smol_vocab):
    m = smol_compiler.compile(Constraint.json_schema(OBJ)).new_matcher()
    assert all(m.accept_token(t) for t in _encode(smol_tokenizer, '{"a": 1}'))
    assert m.is_accepting() and m.is_terminated()
    assert allowed(m, smol_vocab) == [2]
    assert m.accept_token(2) and m.is_terminated()


def test_eos_and_continuation_where_grammar_can_continue(smol_compiler, smol_tokenizer, smol_vocab):
    m = smol_compiler.compile(Constraint.regex(r"[0-9]+")).new_matcher()
    assert not m.accept_token(2)  # nothing yet: EOS not allowed
    assert all(m.accept_token(t) for t in _encode(smol_tokenizer, "12"))
    ids = allowed(m, smol_vocab)
    assert 2 in ids and len(ids) > 1
    assert m.is_accepting() and not m.is_terminated()


def test_rejected_token_leaves_state_unchanged(smol_compiler, smol_tokenizer):
    m = smol_compiler.compile(Constraint.json_schema(OBJ)).new_matcher()
    ids = _encode(smol_tokenizer, '{"a": 1}')
    assert m.accept_token(ids[0])
    assert not m.accept_token(_encode(smol_tokenizer, "x")[0])
    assert not m.accept_token(-1) and not m.accept_token(10**9)
    assert m.error() is None
    assert all(m.accept_token(t) for t in ids[1:]) and m.accept_token(2)


def test_rollback_and_reset(smol_compiler, smol_tokenizer, smol_vocab):
    m = smol_compiler.compile(Constraint.json_schema(OBJ)).new_matcher()
    ids = _encode(smol_tokenizer, '{"a": 12}')
    first = allowed(m, smol_vocab)
    for t in ids:
        assert m.accept_token(t)
    assert m.accept_token(2) and m.num_tokens == len(ids) + 1
    m.rollback(3)
    assert m.num_tokens == len(ids) - 2
    assert all(m.accept_token(t) for t in ids[-2:]) and m.accept_token(2)
    with pytest.raises(ValueError):
        m.rollback(m.num_tokens + 1)
    m.reset()
    assert m.num_tokens == 0 and allowed(m, smol_vocab) == first


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_rollback_past_eos_after_a_stop(smol_compiler, smol_tokenizer, smol_vocab, n):
    """Once the grammar has stopped, llguidance takes EOS without recording a token; rolling back
    ``n`` tokens over it still lands where ``n`` tokens were accepted before (speculative drafts
    end with the EOS that a stop forces, and the drafter rolls them back)."""
    c = smol_compiler.compile(Constraint.json_schema(OBJ))
    ids = _encode(smol_tokenizer, '{"a": 12}') + [2]
    m = c.new_matcher()
    assert all(m.accept_token(t) for t in ids[:-1]) and m.is_terminated()
    assert m.accept_token(2) and m.num_tokens == len(ids)
    m.rollback(n)
    want = c.new_matcher()
    assert all(want.accept_token(t) for t in ids[: len(ids) - n])
    assert m.num_tokens == want.num_tokens and allowed(m, smol_vocab) == allowed(want, smol_vocab)
    assert all(m.accept_token(t) for t in ids[len(ids) - n :]) and m.is_terminated()


def test_jump_forward(smol_compiler, smol_tokenizer):
    c = Constraint.json_schema(OBJ, whitespace="compact")
    m = smol_compiler.compile(c).new_matcher()
    assert m.find_jump_forward_string() == '{"a":'
    forced = m.jump_forward_tokens()
    # tokens stop where the next token could still merge with what follows
    assert forced and '{"a":'.startswith(smol_tokenizer.decode(forced))
    assert all(m.accept_token(t) for t in forced)
    choice = smol_compiler.compile(Constraint.choice(["hello world", "hello there"])).new_matcher()
    assert choice.find_jump_forward_string().startswith("hello")


def test_bitmask_helpers_and_rows(smol_compiler, smol_vocab):
    mask = allocate_token_bitmask(3, smol_vocab.vocab_size)
    assert mask.dtype == torch.int32 and mask.shape == (3, (smol_vocab.vocab_size + 31) // 32)
    assert bitmask_to_bool(mask, smol_vocab.vocab_size).all()
    m = smol_compiler.compile(Constraint.choice(["yes", "no"])).new_matcher()
    m.fill_next_token_bitmask(mask, 1)
    bits = bitmask_to_bool(mask, smol_vocab.vocab_size)
    assert bits[0].all() and bits[2].all()
    assert 0 < int(bits[1].sum()) < 20
    with pytest.raises(ValueError):
        m.fill_next_token_bitmask(mask.to(torch.int64), 0)


def test_fill_writes_only_its_row_of_any_layout(smol_compiler, smol_vocab):
    """The fill writes at the row's address (no row view): views with an offset, rows wider
    than the vocabulary (the tail zeroed), and refusals of layouts it cannot write."""
    m = smol_compiler.compile(Constraint.choice(["yes", "no"])).new_matcher()
    words = (smol_vocab.vocab_size + 31) // 32
    alone = torch.full((1, words), -1, dtype=torch.int32)
    m.fill_next_token_bitmask(alone, 0)
    wide = torch.full((4, words + 3), -1, dtype=torch.int32)
    m.fill_next_token_bitmask(wide[1:], 1)  # a view starting at row 1: row 2 of ``wide``
    assert torch.equal(wide[2, :words], alone[0]) and not wide[2, words:].any()
    assert (wide[[0, 1, 3]] == -1).all()
    with pytest.raises(ValueError):
        m.fill_next_token_bitmask(wide.t().contiguous().t(), 0)  # columns contiguous
    with pytest.raises(IndexError):
        m.fill_next_token_bitmask(wide, 4)
    with pytest.raises(ValueError):
        m.fill_next_token_bitmask(wide[:, : words - 1], 0)


def test_mask_matches_llguidance_reference(qwen_compiler, qwen_vocab, qwen_tokenizer):
    """Our fill equals llguidance's own torch helper on the same state (format oracle)."""
    from llguidance.torch import fill_next_token_bitmask

    c = qwen_compiler.compile(Constraint.json_schema(OBJ))
    ours, ref = c.new_matcher(), c.new_matcher()
    for t in _encode(qwen_tokenizer, '{"a'):
        assert ours.accept_token(t) and ref.accept_token(t)
    a = allocate_token_bitmask(1, qwen_vocab.vocab_size)
    b = allocate_token_bitmask(1, qwen_vocab.vocab_size)
    ours.fill_next_token_bitmask(a, 0)
    fill_next_token_bitmask(ref._m, b, 0)
    assert torch.equal(a, b)


def test_compile_cache_and_threads(smol_vocab):
    compiler = ConstraintCompiler(smol_vocab, cache_bytes=1 << 20)
    c = Constraint.json_schema(OBJ)
    assert compiler.compile(c) is compiler.compile(Constraint.json_schema(OBJ))
    results = []
    schemas = [{"type": "object", "properties": {f"k{i}": {"type": "integer"}}} for i in range(40)]

    def work(offset: int) -> None:
        for s in schemas[offset::4]:
            results.append(compiler.compile(Constraint.json_schema(s)))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 40
    assert compiler.cache.size_bytes <= 1 << 20
    assert len(compiler.cache) < 41  # evicted by the byte bound


def test_compile_timeout(smol_vocab):
    class SlowCompiler(ConstraintCompiler):
        def _build(self, constraint):
            time.sleep(0.5)
            return super()._build(constraint)

    compiler = SlowCompiler(smol_vocab, timeout_s=0.05)
    start = time.perf_counter()
    with pytest.raises(CompileTimeoutError) as info:
        compiler.compile(Constraint.json_schema(OBJ))
    assert time.perf_counter() - start < 0.4
    assert "timeout_s" in str(info.value)


def test_empty_languages_are_errors(smol_compiler):
    with pytest.raises(InvalidGrammarError):
        smol_compiler.compile(Constraint.grammar('start: start "a"'))
    with pytest.raises(InvalidSchemaError):
        smol_compiler.compile(
            Constraint.json_schema(
                {"type": "object", "properties": {"a": False}, "required": ["a"]}
            )
        )


def test_catastrophic_regex_works(smol_compiler, smol_tokenizer):
    c = smol_compiler.compile(Constraint.regex("(a+)+b"))
    assert accepts_text(c, smol_tokenizer, "aaaaaaaaaaaaaaaaaaaaaaab")
    assert not accepts_text(c, smol_tokenizer, "aaaaaaaaaaaaaaaaaaaaaaaa")
    c = smol_compiler.compile(Constraint.regex("[ab]*a[ab]{20}"))
    assert accepts_text(c, smol_tokenizer, "b" * 5 + "a" + "b" * 20)
    assert not accepts_text(c, smol_tokenizer, "b" * 5 + "a" + "b" * 19)


def test_large_alternation_compiles(smol_compiler, smol_tokenizer):
    words = [f"w{i}x" for i in range(1000)]
    c = smol_compiler.compile(Constraint.choice(words))
    assert accepts_text(c, smol_tokenizer, "w517x")
    assert not accepts_text(c, smol_tokenizer, "w1000x")


def test_choice_list_beyond_parser_row_limit(smol_compiler, smol_tokenizer, smol_vocab):
    """More alternatives than llguidance's 2,000-item Earley row: every token the first mask
    allows must be accepted (it was not: the matcher died on its first token)."""
    words = [f"{i}_{'y' * 20}" for i in range(5000)]
    c = smol_compiler.compile(Constraint.choice(words))
    first = allowed(c.new_matcher(), smol_vocab)
    assert first and all(c.new_matcher().accept_token(t) for t in first)
    assert accepts_text(c, smol_tokenizer, words[4321])
    assert not accepts_text(c, smol_tokenizer, "5000_" + "y" * 20)
    prefixes = smol_compiler.compile(Constraint.choice(["A", "AB", "", "ABC"]))
    for text in ("A", "AB", "", "ABC"):
        assert accepts_text(prefixes, smol_tokenizer, text)
    assert not accepts_text(prefixes, smol_tokenizer, "ABCD")
