"""The grounding co-matcher (``GroundedSpans``): inside a grounded string the mask is exactly
the tokens whose bytes, up to a closing quote, continue a span of the document (or end one,
where what follows the quote is the grammar's), checked by brute force over small random
documents against the set of spans; beside the llguidance substring lexeme it replaced; and the
C walk gives the Python twin's masks."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from stencil.constraints import (
    Constraint,
    ConstraintCompiler,
    TokenVocab,
    allocate_token_bitmask,
)
from stencil.constraints.grounding.lark_writer import (
    _has_span,
    _may_end,
    _may_start,
    marked_text,
    source_chunks,
)
from stencil.constraints.grounding.span_automaton import SpanAutomaton, load_span_library
from stencil.constraints.grounding.span_automaton_ref import SpanAutomatonRef

PIECES = [*'abc XYZ"\\\n\t.,:-é東😀\x01\x0b\x1f', "Ada", "Lovelace", "Ada ", "1,580.00", "\u3000"]
GROUNDED = {"type": "string", "x-grounded": True}
# the same language through the llguidance substring lexeme (a pattern keeps a grounded
# string off the co-matcher; ``.*`` matches every JSON text)
LEXEME = {"type": "string", "x-grounded": True, "pattern": ".*"}


def schema(value: dict) -> dict:
    return {"type": "object", "properties": {"v": value}, "required": ["v"]}


def documents(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    docs = []
    while len(docs) < n:
        doc = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 14)))
        if _has_span(source_chunks(doc)):
            docs.append(doc)
    return docs


def spans_of(doc: str) -> set[bytes]:
    chunks = source_chunks(doc)
    out = set()
    for i in range(len(chunks)):
        for j in range(i, len(chunks)):
            if _may_start(chunks[i]) and _may_end(chunks[j]):
                out.add("".join(chunks[i : j + 1]).encode())
    return out


def closing_quote(value: bytes) -> int:
    """The index of the quote that closes a JSON string whose content is ``value`` (-1: none)."""
    escaped = False
    for i, b in enumerate(value):
        if escaped:
            escaped = False
        elif b == ord("\\"):
            escaped = True
        elif b == ord('"'):
            return i
    return -1


def mask_ids(matcher, vocab) -> set[int]:
    mask = allocate_token_bitmask(1, vocab.vocab_size)
    matcher.fill_next_token_bitmask(mask, 0)
    bits = np.unpackbits(mask.numpy()[0].view(np.uint8), bitorder="little")
    return set(np.flatnonzero(bits[: vocab.vocab_size]).tolist())


@pytest.fixture(scope="module")
def token_bytes(smol_vocab) -> list[bytes]:
    return [
        b"" if smol_vocab.is_special(t) else smol_vocab.token_bytes(t)
        for t in range(smol_vocab.tokenizer_size)
    ]


def expected(value: bytes, spans: set[bytes], prefixes: set[bytes], free, token_bytes):
    """Brute force: the tokens whose bytes up to a closing quote continue a span (or end one
    on a chunk boundary), among those the free string allows (what follows the quote)."""
    out = set()
    for t in free:
        v = value + token_bytes[t]
        close = closing_quote(v)
        if close < 0 and v in prefixes or close >= 0 and v[:close] in spans:
            out.add(t)
    return out


@pytest.mark.parametrize("seed", range(4))
def test_the_mask_is_the_brute_force_span_set(smol_compiler, smol_tokenizer, token_bytes, seed):
    vocab = smol_compiler.vocab
    rng = random.Random(seed)
    head = smol_tokenizer.encode('{"v": "', add_special_tokens=False)
    extra = dropped = 0
    for doc in documents(seed, 4):
        spans = spans_of(doc)
        prefixes = {s[:i] for s in spans for i in range(len(s) + 1)}
        compiled = [
            smol_compiler.compile(Constraint.json_schema(schema(s), source_text=doc))
            for s in (GROUNDED, LEXEME)
        ]
        new, old = (c.new_matcher() for c in compiled)
        assert compiled[0].has_spans and not compiled[1].has_spans
        free = smol_compiler.compile(Constraint.json_schema(schema({"type": "string"})))
        free = free.new_matcher()
        for m in (new, old, free):
            assert all(m.accept_token(t) for t in head)
        value = b""
        for _ in range(8):
            ours, theirs = mask_ids(new, vocab), mask_ids(old, vocab)
            want = expected(value, spans, prefixes, mask_ids(free, vocab), token_bytes)
            assert ours <= want, (doc, value, sorted(ours - want)[:10])
            assert theirs <= ours, (doc, value, sorted(theirs - ours)[:10])
            # what the mask leaves out of the brute-force set, llguidance's lexeme left out too:
            # on a forced path in a value's first bytes it keeps only the canonical token
            assert not (want - ours) & theirs
            for t in want - ours:
                assert new.accept_token(t), (doc, value, t)  # ... and still accepts the others
                new.rollback(1)
            extra += len(ours - theirs)
            dropped += len(want - ours)
            inside = [t for t in ours if closing_quote(value + token_bytes[t]) < 0]
            if not inside:
                break
            t = rng.choice(sorted(inside))
            assert new.accept_token(t) and free.accept_token(t)
            if not old.accept_token(t):
                break  # a token llguidance's lexeme drops (see the module docstring)
            value += token_bytes[t]
    print(f"tokens beyond llguidance's lexeme: {extra}, left out like it: {dropped}")


def feed(compiled, tokenizer, text: str):
    """A new matcher of ``compiled`` that has accepted ``text``."""
    m = compiled.new_matcher()
    for t in tokenizer.encode(text, add_special_tokens=False):
        assert m.accept_token(t)
    return m


def test_tokens_off_the_mask_are_refused(smol_compiler, smol_tokenizer, token_bytes):
    doc = 'Acme Cloud Services Ltd. and "Globex" \\ Dept.'
    c = smol_compiler.compile(Constraint.json_schema(schema(GROUNDED), source_text=doc))
    m = feed(c, smol_tokenizer, '{"v": "Acme Cloud')
    ids = {b: t for t, b in enumerate(token_bytes) if b}
    before = m.num_tokens
    for bad in (b" Inc", b" cloud", b"\x0b", b" s", b"\\"):  # no span's; a probe byte
        assert not m.accept_token(ids[bad]), bad
    assert m.num_tokens == before
    assert m.accept_token(ids[b'"'])  # "Acme Cloud" is a span: the quote may close it
    m.rollback(1)
    for t in smol_tokenizer.encode(' Services Ltd."}', add_special_tokens=False):
        assert m.accept_token(t)
    assert m.accept_token(c.vocab.eos_token_ids[0])


def test_rollback_restores_the_span_position(smol_compiler, smol_tokenizer, token_bytes):
    doc = "Ada Lovelace wrote notes; Ada Byron rode."
    c = smol_compiler.compile(Constraint.json_schema(schema(GROUNDED), source_text=doc))
    m = feed(c, smol_tokenizer, '{"v": "Ada')
    at_ada = mask_ids(m, c.vocab)
    for t in smol_tokenizer.encode(" Lovelace", add_special_tokens=False):
        assert m.accept_token(t)
    m.rollback(len(smol_tokenizer.encode(" Lovelace", add_special_tokens=False)))
    assert mask_ids(m, c.vocab) == at_ada
    heads = {token_bytes[t][:2] for t in at_ada}
    assert heads >= {b" L", b" B", b'"'} and b" w" not in heads


@pytest.mark.parametrize("seed", range(3))
def test_the_c_walk_gives_the_python_masks(smol_compiler, seed):
    lib = load_span_library()
    if lib is None:
        pytest.skip("no C compiler")
    trie = smol_compiler.span_walk()[0]
    rng = random.Random(seed)
    words = (smol_compiler.vocab.vocab_size + 31) // 32
    for doc in documents(100 + seed, 6):
        text = marked_text(source_chunks(doc))
        c, py = SpanAutomaton(lib, text, trie, words), SpanAutomatonRef(text, trie, words)
        pos_c, pos_py = c.start(), py.start()
        for _ in range(10):
            assert c.states(pos_c) == py.states(pos_py)
            assert c.can_end(pos_c) == py.can_end(pos_py)
            mask_c, mask_py = np.zeros(words, np.uint32), np.zeros(words, np.uint32)
            c.walk(pos_c, mask_c)
            py.walk(pos_py, mask_py)
            assert np.array_equal(mask_c, mask_py)
            row_c, row_py = (
                np.full(words, 0x5555AAAA, np.uint32),
                np.full(words, 0x5555AAAA, np.uint32),
            )
            spare = np.zeros(words, np.uint32)
            c.walk_and(pos_c, spare.ctypes.data, row_c.ctypes.data)
            py.walk_and(pos_py, spare.ctypes.data, row_py.ctypes.data)
            assert np.array_equal(row_c, row_py) and np.array_equal(row_c, mask_c & 0x5555AAAA)
            ids = np.flatnonzero(np.unpackbits(mask_py.view(np.uint8), bitorder="little"))
            if not len(ids):
                break
            data = smol_compiler.vocab.token_bytes(int(rng.choice(ids)))
            (pos_c, used_c), (pos_py, used_py) = c.feed(pos_c, data), py.feed(pos_py, data)
            assert used_c == used_py and (pos_c is None) == (pos_py is None)
            if pos_c is None or used_c < len(data):
                break


def test_the_python_walk_serves_when_there_is_no_c(smol_vocab, smol_compiler, smol_tokenizer):
    """A compiler without the C walk (as where no compiler is found) gives the same masks, here
    on a union of two grounded strings (both alive until the value tells them apart)."""
    python_only = ConstraintCompiler(smol_vocab, cache_bytes=0)
    python_only._span_walk = (smol_compiler.span_walk()[0], None)
    union = {"anyOf": [GROUNDED, {**GROUNDED, "x-grounded": True, "description": "other"}]}
    doc = 'Ada "Lovelace" \\ wrote 東京 notes in 1843.'
    c = Constraint.json_schema(schema(union), source_text=doc)
    fast, slow = smol_compiler.compile(c).new_matcher(), python_only.compile(c).new_matcher()
    for t in smol_tokenizer.encode('{"v": "', add_special_tokens=False):
        assert fast.accept_token(t) and slow.accept_token(t)
    assert len(fast._ground[-1][1]) == 2  # both grounded strings of the union are alive
    rng = random.Random(5)
    for _ in range(14):
        allowed = mask_ids(fast, smol_vocab)
        assert allowed == mask_ids(slow, smol_vocab)
        t = rng.choice(sorted(allowed))
        assert fast.accept_token(t) and slow.accept_token(t)
        if t in smol_vocab.eos_token_ids:
            break


def test_an_isolated_compile_keeps_the_co_matcher(smol_vocab, smol_tokenizer):
    """The worker translates (the marked texts ride back in the constraint); the automata are
    built here."""
    plain = schema({"type": "string"})
    c = Constraint.json_schema(plain, source_text="From: Acme Cloud Ltd.", ground_strings=True)
    with ConstraintCompiler(smol_vocab, workers=1) as isolated:
        compiled = isolated.compile(Constraint.json_schema(plain, **dict(c.options)))
    assert compiled.has_spans
    eos = smol_vocab.eos_token_ids[0]
    for text, ok in (('{"v": "Acme Cloud"}', True), ('{"v": "Acme Clouds"}', False)):
        m = compiled.new_matcher()
        ids = smol_tokenizer.encode(text, add_special_tokens=False)
        assert (all(m.accept_token(t) for t in ids) and m.accept_token(eos)) is ok, text


LONG = ['"abcdefghijkl', ' "abcdefghijkl', ' "abcdefghijklm"', ' "abcdefghij", "mnopqrstuvw']
ARRAY = {"type": "array", "items": GROUNDED}


@pytest.fixture(scope="module")
def long_vocab(smol_tokenizer) -> TokenVocab:
    """SmolLM2's vocabulary with ``LONG`` added: tokens carrying more bytes after a quote than
    the grammar's window (as Qwen's ``"../../../`` and Gemma's ``"*************"`` do)."""
    data = json.loads(smol_tokenizer.backend_tokenizer.to_str())
    size = len(data["model"]["vocab"])
    for i, text in enumerate(LONG):
        data["model"]["vocab"][text.replace(" ", "Ġ")] = size + i  # byte-level BPE's space
    return TokenVocab.from_tokenizer_json(
        json.dumps(data), size + len(LONG), size + len(LONG), (0,)
    )


@pytest.mark.parametrize(
    ("doc", "value", "token", "then"),
    [
        ("abcdefghijkl mnop", GROUNDED, '"abcdefghijkl', '"}'),
        ("abcdefghijkl mnop", GROUNDED, ' "abcdefghijkl', ' mnop"}'),
        ("xyz abcdefghijklmnop", GROUNDED, ' "abcdefghijkl', 'mnop"}'),  # a span's first bytes
        ("abcdefghijk", GROUNDED, '"abcdefghijkl', None),  # 11 of its 12 bytes
        ("abcdefghXYZ mnop", GROUNDED, ' "abcdefghijkl', None),  # the window's 8 only
        ("abcdefghijklm and more", GROUNDED, ' "abcdefghijklm"', "}"),  # a whole value
        ("abcdefghijklmn", GROUNDED, ' "abcdefghijklm"', None),  # cut out of a word
        ("abcdefghij mnopqrstuvwxyz", ARRAY, ' "abcdefghij", "mnopqrstuvw', 'xyz"]}'),
        ("abcdefghij", ARRAY, ' "abcdefghij", "mnopqrstuvw', None),  # the second is no span
        ("abcdefghijkl mnopqrstuvw", ARRAY, ' "abcdefghij", "mnopqrstuvw', None),  # the first
    ],
)
def test_tokens_longer_than_the_window_are_checked_whole(
    long_vocab, smol_tokenizer, doc, value, token, then
):
    """A token with more than WINDOW bytes after a quote is in the mask, and accepted, exactly
    when every string it opens goes on as a span (``then`` completes the value; None: none)."""
    compiler = ConstraintCompiler(long_vocab, cache_bytes=0)
    c = compiler.compile(Constraint.json_schema(schema(value), source_text=doc))
    m = feed(c, smol_tokenizer, '{"v":' + (" [" if value is ARRAY else ""))
    t = long_vocab.tokenizer_size - len(LONG) + LONG.index(token)
    ok = then is not None
    assert (t in mask_ids(m, long_vocab), m.accept_token(t)) == (ok, ok)
    if ok:
        rest = smol_tokenizer.encode(then, add_special_tokens=False)
        assert all(m.accept_token(t) for t in rest) and m.accept_token(0)
