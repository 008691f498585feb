"""When ``close_on_length`` starts searching: a closing path the search cannot build yet (an email
still to be written) must not make the sequence "hopeless" from its first token, and a path that
outgrows the room left starts the search early. Regression tests for a number looping to the
budget that was left unclosed (finish "length", invalid JSON) once the early window came in."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from stencil.constraints import (
    Constraint,
    ConstraintCompiler,
    TokenVocab,
    allocate_token_bitmask,
    bitmask_to_bool,
)
from stencil.engine.closing import WINDOW, CloseSearch, closer_token_ids, in_window, shortest_close

PAYMENT = {
    "type": "object",
    "properties": {
        "email": {"type": "string", "format": "email"},
        "amount": {"type": "number"},
    },
    "required": ["email", "amount"],
}


@pytest.fixture(scope="module")
def setup(tokenizer):
    vocab = TokenVocab.from_hf(tokenizer)

    def mask(m):
        bits = allocate_token_bitmask(1, vocab.vocab_size)
        m.fill_next_token_bitmask(bits, 0)
        return bits

    search = CloseSearch(
        closer_token_ids(tokenizer),
        lambda text: tokenizer.encode(text, add_special_tokens=False),
        lambda m: bitmask_to_bool(mask(m), vocab.vocab_size)[0].nonzero().flatten().tolist(),
        lambda m: mask(m).numpy().tobytes(),
    )
    return ConstraintCompiler(vocab), search


def seq_after(compiler, tokenizer, schema, text, max_len):
    matcher = compiler.compile(Constraint.json_schema(schema, whitespace="compact")).new_matcher()
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert all(matcher.accept_token(t) for t in ids)
    return SimpleNamespace(
        matcher=matcher, num_tokens=len(ids), max_len=max_len, close_need=0, close_probe_at=0
    )


def test_an_unfinished_email_does_not_open_the_window_early(setup, tokenizer):
    compiler, search = setup
    seq = seq_after(compiler, tokenizer, PAYMENT, '{"email":"ada', max_len=200)
    # the search's closer tokens reach a domain only after the grammar forces "@" at the local
    # part's 64th character: a long path, well within the room left
    path = shortest_close(seq.matcher, search, 200)
    assert path is None or len(path) + WINDOW < seq.max_len - seq.num_tokens
    assert not in_window(seq, search)
    assert seq.close_need == (0 if path is None else len(path))


def test_a_looping_number_closes_at_the_end(setup, tokenizer):
    compiler, search = setup
    text = '{"email":"ada@example.org","amount":1.' + "1" * 40
    seq = seq_after(compiler, tokenizer, PAYMENT, text, max_len=200)
    assert not in_window(seq, search)  # a 1-token path: the plain window
    seq.num_tokens = seq.max_len - WINDOW
    assert in_window(seq, search)
    assert shortest_close(seq.matcher, search, 1) is not None


def test_a_path_that_outgrows_the_room_opens_the_window(setup, tokenizer):
    compiler, search = setup
    nested = {"type": "array", "items": {"$ref": "#"}, "maxItems": 1}
    seq = seq_after(compiler, tokenizer, nested, "[", max_len=36 + WINDOW + 10)
    assert not in_window(seq, search) and seq.close_need == 1  # "]" closes it
    for _ in range(35):
        assert seq.matcher.accept_token(tokenizer.encode("[", add_special_tokens=False)[0])
    seq.num_tokens, seq.close_probe_at = 36, 0
    assert in_window(seq, search)  # the path (36 brackets) no longer fits beside the window


def test_a_special_use_email_domain_closes(setup, tokenizer):
    """``acme.test`` is a special-use domain the email check refuses to end on: the close must
    grow the label by a letter or two, not burn its probes on a 63-character run of digits."""
    compiler, search = setup
    text = '{"email":"marie.pauling@acme.test'
    seq = seq_after(compiler, tokenizer, PAYMENT, text, max_len=200)
    assert not seq.matcher.accept_token(tokenizer.encode('"', add_special_tokens=False)[0])
    path = shortest_close(seq.matcher, search, 16)
    assert path is not None
    closed = json.loads(text + tokenizer.decode(path))
    assert closed["email"].startswith("marie.pauling@acme.test") and closed["email"] != text[10:]
    assert all(seq.matcher.accept_token(t) for t in path) and seq.matcher.is_accepting()
