"""The drafter's sources (prompt lookup, the structure-aware ``key_proposer``, and a request's own
``proposer``: the hook), how it spells structure (``spelling``), where a copied value ends and how
far it drafts (``chance``): each source's proposal at the points it serves, none where it does not
apply. Drafts are proposals only: the engine's output with them is the output without them
(``tests/extract/test_document_proposer.py``: the document's proposer lent to the embedded
model)."""

from __future__ import annotations

import random

import pytest
import torch

from stencil import RequestError, SamplingParams
from stencil.constraints import Constraint, ConstraintCompiler, TokenVocab
from stencil.engine.sequence import Sequence
from stencil.engine.spec_decode.chance import MIN_CHANCE, forced_run_pays, ngram_chance
from stencil.engine.spec_decode.config import SpeculativeConfig
from stencil.engine.spec_decode.drafter import Drafter
from stencil.engine.spec_decode.key_proposer import KeyProposer, property_names
from stencil.engine.spec_decode.ngram_proposer import NgramProposer
from stencil.engine.spec_decode.proposer import Proposal, value_key
from stencil.engine.spec_decode.spelling import Spelling

RECEIPT = """BLUE BOTTLE CAFE
Date: 2024-05-17

Cappuccino             4.50
Croissant              3.25
Orange juice           3.80

**Paid by:** card
"""
SCHEMA = {
    "type": "object",
    "properties": {
        "merchant": {"type": "string"},
        "date": {"type": "string"},
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "price": {"type": "number"}},
                "required": ["name", "price"],
            },
        },
        "paid_by": {"type": "string"},
    },
    "required": ["merchant", "date", "items", "paid_by"],
}


@pytest.fixture(scope="module")
def compiler(tokenizer):
    vocab = TokenVocab.from_hf(tokenizer, vocab_size=49152, eos_token_ids=[2])
    return ConstraintCompiler(vocab, workers=0)


def _matcher(compiler, tokenizer, text: str, grounded: bool = False):
    ground = dict(source_text=RECEIPT, ground_strings=True) if grounded else {}
    c = Constraint.json_schema(SCHEMA, whitespace="compact", **ground)
    matcher = compiler.compile(c).new_matcher()
    for t in tokenizer.encode(text, add_special_tokens=False):
        assert matcher.accept_token(t), text
    return matcher


def _lookup_oracle(context: list[int], lo: int, hi: int, k: int) -> tuple[list[int], int]:
    """Prompt lookup by brute force: the longest suffix n in [lo, hi] that occurs earlier (the
    occurrence inside ``context[:-1]``), its most recent occurrence's next ``k`` tokens."""
    for n in range(min(hi, len(context) - 1), lo - 1, -1):
        ends = [
            e for e in range(n - 1, len(context) - 1) if context[e - n + 1 : e + 1] == context[-n:]
        ]
        if ends:
            return context[ends[-1] + 1 : ends[-1] + 1 + k], n
    return [], 0


def test_prompt_lookup_matches_brute_force():
    rng = random.Random(0)
    for _ in range(3000):
        context = [rng.randrange(rng.randint(1, 6)) for _ in range(rng.randint(0, 40))]
        lo, k = rng.randint(1, 4), rng.randint(0, 6)
        hi = rng.randint(lo, 6)
        want = _lookup_oracle(context, lo, hi, k) if k > 0 and len(context) > lo else ([], 0)
        assert NgramProposer(lo, hi).lookup(context, k) == want, (context, lo, hi, k)


@pytest.mark.parametrize(
    ("schema", "names"),
    [
        (SCHEMA, ("merchant", "date", "items", "name", "price", "paid_by")),
        ({"type": "object", "properties": {"a": {"enum": [{"properties": {"x": 1}}]}}}, ("a",)),
        ({"$defs": {"p": {"properties": {"b": {}}}}, "properties": {"a": {"$ref": "#/$defs/p"}}},
         ("b", "a")),
    ],
)  # fmt: skip
def test_property_names_in_declaration_order(schema, names):
    assert property_names(Constraint.json_schema(schema)) == names


def test_property_names_of_other_constraints():
    assert property_names(Constraint.regex("[a-z]+")) == ()
    assert property_names(None) == ()


@pytest.mark.parametrize(
    ("text", "draft"),
    [
        ('{"', "merchant"),  # right after a key's opening quote
        ("{", '"merchant'),  # the object opened: the key's quote first
        ('{"merchant":"BLUE","', "date"),
        ('{"merchant":"BLUE', '","date'),  # the value may end: closed, then the next key
        ('{"merchant":"BLUE"', ',"date'),
        ('{"merchant":"BLUE","date":"x","items":[{"name":"C","price":4.5', '},{"name'),
        ('{"merchant":"BLUE","date":"x","items":[{"name":"C","', "price"),
        ('{"merchant":"', ""),  # a value opens: no key fits
        ('{"merchant":"BLUE","date":"x","items":[{"name', ""),  # inside a key
    ],
)
def test_key_proposer_drafts_the_next_declared_key(compiler, tokenizer, text, draft):
    matcher = _matcher(compiler, tokenizer, text)
    before = matcher.num_tokens
    tokens = KeyProposer(tokenizer).propose(matcher, property_names(_c()), text[-64:], {})
    assert tokenizer.decode(tokens) == draft
    assert matcher.num_tokens == before  # probing leaves the matcher where it was


def _c():
    return Constraint.json_schema(SCHEMA)


def test_spelling_records_how_the_output_split_short_texts(compiler, tokenizer):
    vocab = tokenizer.get_vocab()
    split = [vocab['",'], vocab['"']]  # ``","`` is one token too: the model may write either
    output = tokenizer.encode('{"a":"x', add_special_tokens=False) + split
    prompt = [1, 2, 3]
    spelled: dict[str, list[int]] = {}
    Spelling(tokenizer).update(spelled, prompt + output, 0, len(prompt))
    assert spelled['","'] == split and spelled['x",'] == output[-3:-1]
    assert all(len(text) <= 8 for text in spelled)
    assert tokenizer.decode(prompt) not in spelled  # only the output is read
    tokens = KeyProposer(tokenizer).propose(
        _matcher(compiler, tokenizer, '{"merchant":"BLUE'),
        property_names(_c()),
        '{"merchant":"BLUE',
        spelled,
    )
    assert tokens[:2] == split and tokenizer.decode(tokens) == '","date'  # the closer as spelled


def test_spelling_of_a_text_an_output_has_not_written_yet(tokenizer):
    vocab = tokenizer.get_vocab()
    split = [vocab['":'], vocab['"']]  # the first key's ``":"``, as the model writes it
    rest = tokenizer.encode('x","b":"y', add_special_tokens=False)
    assert vocab['":"'] in rest  # later ones whole
    output = tokenizer.encode('{"a', add_special_tokens=False) + split + rest
    spelling, spelled = Spelling(tokenizer), {}
    spelling.update(spelled, output, 0, 0)
    assert spelled['":"'] == [vocab['":"']] and spelling.first['":"'] == split
    assert spelling.first_time('":"', spelled) is None  # this output wrote it: not first
    assert spelling.first_time('":"', {}) == split  # a new output's first ``":"``


def test_spelling_keeps_a_token_s_leading_blank(tokenizer):
    token = tokenizer.encode(" hosting", add_special_tokens=False)
    assert Spelling(tokenizer).piece(token[0]) == " hosting"


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("Meetup: Structured Output", "Meetup"),  # a colon before a blank
        ("Cloud hosting (March)     1", "Cloud hosting (March)"),  # a gap between columns
        ("Engine. She wrote", "Engine"),  # a sentence's end
        ("London\nShe", "London"),  # a line's end
        ("Rheinsberger Str. 76/77", "Rheinsberger Str. 76/77"),  # an abbreviation goes on
        ("San Francisco, CA 94105", "San Francisco, CA 94105"),  # so does a comma
    ],
)
def test_a_copied_value_stops_where_it_most_likely_ends(tokenizer, text, kept):
    drafter = Drafter(SpeculativeConfig(num_speculative_tokens=8), tokenizer)
    tokens = tokenizer.encode(text, add_special_tokens=False)
    assert tokenizer.decode(drafter._to_value_end(tokens)) == kept


def test_a_forced_quote_is_drafted_where_it_opens_a_value_only(compiler, tokenizer):
    drafter = Drafter(SpeculativeConfig(num_speculative_tokens=8), tokenizer)
    colon = tokenizer.encode('":', add_special_tokens=False)[-1]
    opening = _matcher(compiler, tokenizer, '{"merchant":')
    assert tokenizer.decode(drafter._encode(opening, colon, {})) == '"'
    code = {
        "type": "object",
        "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}$"}, "n": {}},
    }  # after the code: its quote, then ``,`` or ``}``
    closing = compiler.compile(Constraint.json_schema(code, whitespace="compact")).new_matcher()
    for t in tokenizer.encode('{"code":"ABC', add_special_tokens=False):
        assert closing.accept_token(t)
    assert closing.find_jump_forward_string() == '"'  # three letters: it must close
    assert drafter._encode(closing, tokenizer.encode("ABC", add_special_tokens=False)[-1], {}) == []


def test_text_lookup_copies_from_the_grounded_document(tokenizer):
    doc = "Extra storage (TB)"
    grounded = Constraint.json_schema(SCHEMA, source_text=doc, ground_strings=True)
    prompt = tokenizer.encode(f"Extract the items.\n\n{doc}", add_special_tokens=False)
    output = tokenizer.encode('{"name":"Extra', add_special_tokens=False)
    drafter = Drafter(SpeculativeConfig(num_speculative_tokens=8), tokenizer)
    for constraint, first in ((grounded, " storage"), (None, "ct the")):
        params = SamplingParams(temperature=0, constraint=constraint)
        seq = Sequence(1, "r", 0, prompt + output, len(prompt), params, 256, torch.Generator())
        drafter._sources.clear()
        got = drafter._text(seq, drafter._sources_of(seq), seq.token_ids, 4).tokens
        assert tokenizer.decode(got).startswith(first)  # the prompt's first ``Extra``: Extract


def test_value_key():
    assert value_key('x,"price":') == "price" and value_key('{"a b":"') == "a b"
    assert value_key('{\n  "city": "') == "city" and value_key('{"n": ') == "n"
    assert value_key('{"price":4') is None and value_key("plain text") is None


@pytest.mark.parametrize(
    ("chance", "length", "pays"),
    [(1.0, 64, True), (0.9, 20, True), (0.5, 20, False), (0.6, 4, True), (0.2, 4, False)],
)
def test_forced_run_pays(chance, length, pays):
    assert forced_run_pays(chance, length) is pays


class FixedLookup:
    """Proposes ``tokens`` as found by an n-gram of ``n`` tokens."""

    def __init__(self, tokens: list[int], n: int) -> None:
        self.tokens, self.n = tokens, n

    def lookup(self, context: list[int], k: int) -> tuple[list[int], int]:
        return self.tokens[:k], self.n


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_unconstrained_drafts_stop_where_the_chain_no_longer_pays(tokenizer, n):
    drafter = Drafter(SpeculativeConfig(num_speculative_tokens=8), tokenizer)
    drafter.proposer = FixedLookup(list(range(100, 108)), n)
    seq = Sequence(1, "r", 0, [1, 2], 2, SamplingParams(temperature=0), 256, torch.Generator())
    seq.num_computed_tokens = 2
    first, rest = ngram_chance(n, guided=False)
    want, chance, p = 0, 1.0, first
    while want < 8 and chance * p >= MIN_CHANCE:
        want, chance, p = want + 1, chance * p, rest
    assert drafter.drafts(seq) == list(range(100, 100 + want))
    assert want == {1: 0, 4: 8}.get(n, want)  # a long match is trusted for all k; one token, not


class Lent:
    """A request's proposer: fixed proposals, and what it was asked."""

    def __init__(self, *proposals: Proposal) -> None:
        self.proposals, self.asked = list(proposals), []

    def propose(self, output: str, max_chars: int) -> list[Proposal]:
        self.asked.append((output, max_chars))
        return self.proposals


class Raising:
    def propose(self, output: str, max_chars: int) -> list[Proposal]:
        raise RuntimeError("a proposer's bug")


class NoProposals:
    def propose(self, output: str, max_chars: int) -> list[str]:
        return ["BLUE"]  # texts, not Proposals


def _guided_seq(compiler, tokenizer, output: str, proposer) -> Sequence:
    """A running sequence of the grounded receipt schema whose output is ``output``."""
    prompt = tokenizer.encode(f"Extract the receipt.\n\n{RECEIPT}", add_special_tokens=False)
    ids = tokenizer.encode(output, add_special_tokens=False)
    c = Constraint.json_schema(SCHEMA, whitespace="compact", source_text=RECEIPT,
                               ground_strings=True)  # fmt: skip
    params = SamplingParams(temperature=0, constraint=c, proposer=proposer)
    seq = Sequence(1, "r", 0, prompt + ids, len(prompt), params, 512, torch.Generator())
    seq.matcher = _matcher(compiler, tokenizer, output, grounded=True)
    seq.num_computed_tokens = seq.num_tokens
    return seq


@pytest.mark.parametrize(
    ("proposals", "first"),
    [
        ([Proposal("BLUE BOTTLE CAFE", 0.9, 0.95)], "BLUE BOTTLE CAFE"),
        ([Proposal("Tea Shop", 0.9, 0.9), Proposal("BLUE", 0.9, 0.9)], "BLUE"),  # not stated
        ([Proposal("BLUE", 0.1, 0.9)], None),  # a chance that does not pay is not drafted
    ],
)
def test_a_request_s_proposer_is_drafted_where_the_matcher_accepts_it(
    compiler, tokenizer, proposals, first
):
    lent = Lent(*proposals)
    seq = _guided_seq(compiler, tokenizer, '{"merchant":"', lent)
    drafter = Drafter(SpeculativeConfig(num_speculative_tokens=8), tokenizer)
    drafts = tokenizer.decode(drafter.drafts(seq))
    assert lent.asked[0] == ('{"merchant":"', 8 * 8)  # the output's text, chars for k tokens
    if first is None:
        assert not drafts.startswith("BLUE")
    else:
        assert drafts.startswith(first)


@pytest.mark.parametrize("proposer", [Raising(), NoProposals()])
def test_a_failing_proposer_is_dropped_and_drafting_goes_on(compiler, tokenizer, caplog, proposer):
    seq = _guided_seq(compiler, tokenizer, '{"merchant":"BLUE BOTTLE CAFE","', proposer)
    drafter = Drafter(SpeculativeConfig(num_speculative_tokens=8), tokenizer)
    assert tokenizer.decode(drafter.drafts(seq)).startswith("date")  # the schema's next key
    assert "its proposer failed" in caplog.text
    assert drafter._sources[seq.seq_id].proposer is None


def test_a_proposer_without_propose_is_refused():
    with pytest.raises(RequestError, match="proposer must be an object with a propose"):
        SamplingParams(proposer="labels")
