"""Grounded decoding with real vocabularies: SmolLM2's (the embedded model; byte-level BPE, no
token with more than 3 bytes after a quote), Qwen2.5's (151k; 7 tokens with 9-32 bytes after a
quote) and Gemma 3's (262k, read from the real GGUF file, downloaded once: SentencePiece with
byte fallback, so a one-character piece and its byte token share bytes; 5 long quote tokens, two
of them a whole quoted string).

The tokenizer's own tokens of records whose grounded values are spans are each in the mask and
accepted (merges across the closing quote, long tokens included); records with a value that is
not a substring of the document are refused, by a token the mask leaves out too. Oracles:
``jsonschema`` and substring search over the document (word boundaries where the value starts
and ends with a letter or digit), both apart from the grounding code."""

from __future__ import annotations

import json
import re

import jsonschema
import numpy as np
import pytest

from stencil.constraints import Constraint, allocate_token_bitmask
from stencil.constraints.grounding.lark_writer import WINDOW, marked_text, source_chunks
from stencil.constraints.grounding.span_automaton import SpanAutomaton
from stencil.constraints.grounding.span_automaton_ref import SpanAutomatonRef

# Gemma's GGUF file is fetched once (~250 MB) and its tokenizer read in ~20 s: the slow suite
VOCABS = ["smol", "qwen", pytest.param("gemma", marks=pytest.mark.slow)]
DOC = (
    "Release notes for build 7 (March).\n"
    'Owner: Ada Lovelace; reviewer: "Grace" Hopper \\ QA team.\n'
    "Config lives in ../../../etc/hosts and C:\\tools\\bin; see the description field.\n"
    "Banner: ******************** then -------------------------------- as a rule.\n"
    "Form: ????.??.?? (unfilled). Zürich 東京 😀 done"
)
GROUNDED = {"type": "string", "x-grounded": True}
SCHEMA = {
    "type": "object",
    "properties": {
        "owner": GROUNDED,
        "paths": {"type": "array", "items": GROUNDED},
        "build": {"type": "integer"},
        "note": GROUNDED,
    },
    "required": ["owner", "paths", "build"],
    "additionalProperties": False,
}
GOOD = [
    {"owner": "Ada Lovelace", "paths": ["../../../etc/hosts", "description"], "build": 7},
    {
        "owner": '"Grace" Hopper \\ QA',
        "paths": ["C:\\tools\\bin", "********************"],
        "build": 7,
        "note": "Zürich 東京 😀",
    },
    {
        "owner": "--------------------------------",
        "paths": ["????.??.??", "../../../etc"],
        "build": 7,
        "note": "description field",
    },
    {"owner": "Release notes", "paths": [], "build": 1, "note": "done"},
]
BAD = [
    {"owner": "Ada Byron", "paths": [], "build": 7},
    {"owner": "Ada Lovelace", "paths": ["../../../etc/passwd"], "build": 7},
    {"owner": "Ada", "paths": ["*********************"], "build": 7},  # one star too many
    {"owner": "Ada", "paths": ["---------------------------------"], "build": 7},
    {"owner": "Ada", "paths": ["????.??.??."], "build": 7},
    {"owner": "Ada", "paths": ["description"], "build": 7, "note": "a description"},
]
# how a record is written: spaced, compact (`","`, `":"`, `"]}` merges), indented
LAYOUTS = [{}, {"separators": (",", ":")}, {"indent": 2}]
FREE = json.loads(json.dumps(SCHEMA).replace(', "x-grounded": true', ""))


@pytest.fixture(scope="module", params=VOCABS)
def setup(request):
    name = request.param
    compiler = request.getfixturevalue(f"{name}_compiler")
    tokenizer = request.getfixturevalue(f"{name}_tokenizer")
    grounded = compiler.compile(Constraint.json_schema(SCHEMA, source_text=DOC))
    assert grounded.has_spans
    return compiler, tokenizer, grounded, compiler.compile(Constraint.json_schema(FREE))


def is_span(value: str) -> bool:
    """The oracle: ``value`` is in the document, not cut out of a word at either end, and
    neither starts nor ends with whitespace."""
    if not value or value != value.strip() or value[-1] in ",;:([{«“":
        return False
    tail = r"(?!\w)" if re.search(r"\w$", value) else ""
    return starts_span(value, tail)


def starts_span(prefix: str, tail: str = "") -> bool:
    """The oracle for a value's first characters: some span of the document starts with them."""
    if prefix[:1].isspace() or (prefix and prefix[0] in ",;:)]}»”"):
        return False
    head = r"(?<!\w)" if re.match(r"\w", prefix) else ""
    return re.search(head + re.escape(prefix) + tail, DOC) is not None


def grounded_values(record: dict) -> list[str]:
    return [record["owner"], *record["paths"], *([record["note"]] if "note" in record else [])]


def mask_bits(matcher, vocab) -> np.ndarray:
    mask = allocate_token_bitmask(1, vocab.vocab_size)
    matcher.fill_next_token_bitmask(mask, 0)
    bits = np.unpackbits(mask.numpy()[0].view(np.uint8), bitorder="little")
    return bits[: vocab.vocab_size].astype(bool)


def walk_text(compiled, tokenizer, text: str) -> tuple[bool, bytes]:
    """Feed ``text``'s own tokens, each checked against the mask first: whether all and then
    EOS are accepted, and the token refused (b"" when none)."""
    vocab = compiled.vocab
    m = compiled.new_matcher()
    for t in [*tokenizer.encode(text, add_special_tokens=False), vocab.eos_token_ids[0]]:
        in_mask = bool(mask_bits(m, vocab)[t])
        accepted = m.accept_token(t)
        assert in_mask == accepted, (text, vocab.token_bytes(t), in_mask, accepted)
        if not accepted:
            return False, vocab.token_bytes(t) or b"<eos>"
    return True, b""


@pytest.mark.parametrize("layout", LAYOUTS, ids=["spaced", "compact", "indented"])
def test_the_tokenizers_own_tokens_of_spans_are_accepted(setup, layout):
    _, tokenizer, grounded, _ = setup
    for record in GOOD:
        jsonschema.validate(record, FREE)
        assert all(is_span(v) for v in grounded_values(record)), record
        text = json.dumps(record, ensure_ascii=False, **layout)
        assert walk_text(grounded, tokenizer, text) == (True, b""), text


@pytest.mark.parametrize("layout", LAYOUTS, ids=["spaced", "compact", "indented"])
def test_values_that_are_not_spans_are_refused(setup, layout):
    _, tokenizer, grounded, free = setup
    for record in BAD:
        jsonschema.validate(record, FREE)
        assert not all(is_span(v) for v in grounded_values(record)), record
        text = json.dumps(record, ensure_ascii=False, **layout)
        assert walk_text(free, tokenizer, text)[0], text  # the grammar alone takes it
        ok, refused = walk_text(grounded, tokenizer, text)
        assert not ok, text


def quote_tokens(vocab) -> dict[int, bytes]:
    out = {}
    for t in range(vocab.tokenizer_size):
        data = b"" if vocab.is_special(t) else vocab.token_bytes(t)
        if b'"' in data:
            out[t] = data
    return out


def opens_as_span(data: bytes) -> bool | None:
    """The oracle for a token that opens a grounded value (its bytes from the first quote):
    the value's bytes in it start a span, or are one where it closes it; None: bytes the
    oracle does not judge (not UTF-8, or an escape the token cuts)."""
    text = data[data.index(b'"') + 1 :].decode(errors="replace")
    close = re.search(r'(?<!\\)(?:\\\\)*"', text)
    content = text if close is None else text[: close.end() - 1]
    try:
        value = json.loads(f'"{content}"')
    except json.JSONDecodeError:
        return None
    if "\ufffd" in value:
        return None
    return starts_span(value) if close is None else is_span(value)


def test_tokens_opening_a_value_are_masked_by_the_oracle(setup):
    """Right after ``{"owner":`` every token holding a quote is in the mask exactly when the
    grammar alone takes it and the bytes after its quote start a span (or are one, closed):
    the long ones (more than the grammar's WINDOW bytes after the quote) too."""
    compiler, tokenizer, grounded, free = setup
    vocab = compiler.vocab
    head = tokenizer.encode('{"owner":', add_special_tokens=False)
    g, f = grounded.new_matcher(), free.new_matcher()
    assert all(g.accept_token(t) for t in head) and all(f.accept_token(t) for t in head)
    ours, grammar = mask_bits(g, vocab), mask_bits(f, vocab)
    judged = long = 0
    for t, data in quote_tokens(vocab).items():
        want = opens_as_span(data)
        if want is None or not grammar[t]:
            assert not ours[t] or want is None, data
            continue
        judged += 1
        long += len(data) - data.index(b'"') - 1 > WINDOW
        assert ours[t] == want, (data, bool(ours[t]), want)
        if ours[t]:
            assert g.accept_token(t), data
            g.rollback(1)
        else:
            assert not g.accept_token(t), data
    assert judged > 50
    print(f"{judged} quote tokens judged, {long} of them long")


def test_the_python_walk_gives_the_c_masks(setup):
    """Along a value, the C walk and its Python twin set the same tokens (Gemma's byte-fallback
    twins of one-character pieces included)."""
    compiler, tokenizer, _, _ = setup
    trie, lib = compiler.span_walk()
    if lib is None:
        pytest.skip("no C compiler")
    words = (compiler.vocab.vocab_size + 31) // 32
    text = marked_text(source_chunks(DOC))
    c, py = SpanAutomaton(lib, text, trie, words), SpanAutomatonRef(text, trie, words)
    pos_c, pos_py = c.start(), py.start()
    value = json.dumps("../../../etc/hosts and C:\\tools\\bin")[1:-1]  # JSON string content
    for t in tokenizer.encode(value, add_special_tokens=False):
        mask_c, mask_py = np.zeros(words, np.uint32), np.zeros(words, np.uint32)
        c.walk(pos_c, mask_c)
        py.walk(pos_py, mask_py)
        assert np.array_equal(mask_c, mask_py)
        assert mask_c[t >> 5] >> (t & 31) & 1, compiler.vocab.token_bytes(t)
        data = compiler.vocab.token_bytes(t)
        (pos_c, _), (pos_py, _) = c.feed(pos_c, data), py.feed(pos_py, data)
