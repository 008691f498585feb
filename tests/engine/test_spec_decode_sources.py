"""The drafter's sources (prompt lookup, the structure-aware ``key_proposer``, and a request's own
``proposer``: the hook), how it spells structure (``spelling``), where a copied value ends and how
far it drafts (``chance``): each source's proposal at the points it serves, none where it does not
apply. Drafts are proposals only: the engine's output with them is the output without them
(``tests/extract/test_document_proposer.py``: the document's proposer lent to the embedded
model)."""

from __future__ import annotations

import json
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
from stencil.engine.spec_decode.spacing import Spaced, Spacing
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


def _matcher(
    compiler, tokenizer, text: str, grounded: bool = False, whitespace="compact", schema=SCHEMA
):
    ground = dict(source_text=RECEIPT, ground_strings=True) if grounded else {}
    c = Constraint.json_schema(schema, whitespace=whitespace, **ground)
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


RECORD = {
    "merchant": "BLUE, BOTTLE",  # a comma and a blank inside a string are no structure
    "date": "2024-05-17",
    "items": [{"name": "Cappuccino", "price": 4.5}, {"name": "Croissant", "price": 3.25}],
    "paid_by": "card",
}
DUMPS = {  # json.dumps's spacings: the oracle of the runs read and of the drafts
    "compact": dict(separators=(",", ":")),
    "default": {},
    "indent 2": dict(indent=2),
    "indent 4": dict(indent=4),
    "tabs": dict(indent="\t"),
}


def _closed(schema: dict) -> dict:
    """``schema`` with no other properties than its own (as ``stencil extract`` asks)."""
    if schema.get("type") == "array":
        return {**schema, "items": _closed(schema["items"])}
    if schema.get("type") != "object":
        return schema
    props = {name: _closed(sub) for name, sub in schema["properties"].items()}
    return {**schema, "properties": props, "additionalProperties": False}


def _runs(text: str) -> list[tuple[tuple[str, int], str]]:
    """The runs of structure of json.dumps output, in order, each under its compact form and
    the depth where it starts: the text between the strings and numbers ``json``'s own
    scanner reads."""
    pos, depth, runs, decoder = 0, 0, [], json.JSONDecoder()
    while pos < len(text):
        start = pos
        while pos < len(text) and text[pos] in ",:{}[] \t\n":
            pos += 1
        run = text[start:pos]
        if pos < len(text):
            runs.append((("".join(run.split()), depth), run))
            _, pos = decoder.raw_decode(text, pos)  # a string or a number
        depth += run.count("{") + run.count("[") - run.count("}") - run.count("]")
    return runs


@pytest.mark.parametrize("style", DUMPS)
def test_spacing_records_each_run_of_structure_as_written_last(style):
    text = json.dumps(RECORD, **DUMPS[style])
    spacing, spaced = Spacing(), Spaced()
    for lo in range(0, len(text), 3):  # read in pieces, as tokens come
        spacing.update(spaced, text[lo : lo + 3])
    runs = _runs(text)
    any_depth = [((form, None), run) for (form, _), run in runs]
    assert spaced.runs == dict(runs + any_depth)  # the latest
    assert spacing.first == dict(reversed(runs + any_depth))  # the first
    inner, outer = dict(runs)[",", 3], dict(runs)[",", 1]  # the items' keys, the record's
    for own in (spaced.runs, {}):  # this output's, a new output's (the first)
        for written, form, rest in [
            ('{"items":[{"a":1', ",", inner),
            ('{"a":1', ",", outer),
            ('{"a":1' + outer[:2], "", outer[2:]),  # the run begun
            ('{"a":"x', "", None),  # inside a string: no run
        ]:
            assert spacing.rest(spacing.read(Spaced(own), written), form) == rest


@pytest.mark.parametrize("style", DUMPS)
@pytest.mark.parametrize(
    ("upto", "draft"),
    [
        ('"BLUE, BOTTLE', '"date'),  # a string value may end: closed, then the next key
        ('"2024-05-17",', '"items'),
        ('"Cappuccino', '"price'),  # inside an array's object: its first ``,`` at that depth
        ('"Croissant', '"price'),  # its second
        ("4.5", '"name'),  # the next item, its first key (learned from an earlier output)
        ('"paid_by"', ""),  # a key written: no other key fits
    ],
)
def test_key_drafts_follow_the_output_s_spacing(compiler, tokenizer, style, upto, draft):
    text = json.dumps(RECORD, **DUMPS[style])
    at = text.index(upto) + len(upto)
    output, rest = text[:at], text[at:]
    spacing, spaced = Spacing(), Spaced()
    earlier = {"a": 1, "items": [{"a": 1, "b": 2}, {"a": 3, "b": 4}]}  # an earlier output
    spacing.update(Spaced(), json.dumps(earlier, **DUMPS[style]))
    spacing.update(spaced, output)
    matcher = _matcher(compiler, tokenizer, output, whitespace="bounded")
    tokens = KeyProposer(tokenizer).propose(
        matcher, property_names(_c()), output[-64:], {}, spacing, spaced
    )
    want = rest[: rest.index(draft) + len(draft)] if draft else ""
    assert tokenizer.decode(tokens) == want  # as json.dumps spaces it: ``",\n  "date``
    if draft:
        assert tokens == tokenizer.encode(want, add_special_tokens=False)


@pytest.mark.parametrize("style", DUMPS)
@pytest.mark.parametrize(
    ("upto", "spaced"),
    [
        ('"merchant', '": "'),  # the key's end, its colon and blank, a string's opening quote
        ('"price', ""),  # a number follows: nothing forced after the run
    ],
)
def test_forced_text_after_a_key_follows_the_output_s_spacing(
    compiler, tokenizer, style, upto, spaced
):
    text = json.dumps(RECORD, **DUMPS[style])
    output = text[: text.index(upto) + len(upto)]
    drafter = Drafter(SpeculativeConfig(num_speculative_tokens=8), tokenizer)
    drafter.spacing.update(Spaced(), text)  # an earlier output: the first key's ``: ``
    reading = Spaced()
    drafter.spacing.update(reading, output)
    matcher = _matcher(compiler, tokenizer, output, whitespace="bounded", schema=_closed(SCHEMA))
    assert matcher.find_jump_forward_string() == '"'  # whitespace may come before the colon
    last = tokenizer.encode(output, add_special_tokens=False)[-1]
    want = "" if style == "compact" else spaced  # whitespace may follow the colon
    assert tokenizer.decode(drafter._encode(matcher, last, {}, reading)) == want


@pytest.mark.parametrize("style", DUMPS)
def test_a_finished_output_s_end_is_drafted_where_a_value_ends_it(compiler, tokenizer, style):
    one = _closed({"type": "object", "properties": {"merchant": {"type": "string"}}})
    constraint = Constraint.json_schema({**one, "required": ["merchant"]})  # bounded
    drafter = Drafter(SpeculativeConfig(num_speculative_tokens=8), tokenizer)
    prompt = tokenizer.encode("Extract the receipt.", add_special_tokens=False)
    earlier = tokenizer.encode(json.dumps({"merchant": "Tea"}, **DUMPS[style]))
    params = SamplingParams(temperature=0, constraint=constraint)
    seq = Sequence(1, "r", 0, prompt + earlier, len(prompt), params, 256, torch.Generator())
    drafter._sources_of(seq)
    seq.finish("stop")
    drafter.release(seq)  # how it ended: read where it finished
    output = json.dumps({"merchant": "BLUE"}, **DUMPS[style])[:-1].rstrip()
    reading = Spaced()
    drafter.spacing.update(reading, output)
    matcher = compiler.compile(constraint).new_matcher()
    for t in tokenizer.encode(output, add_special_tokens=False):
        assert matcher.accept_token(t)
    last = tokenizer.encode(output, add_special_tokens=False)[-1]
    want = json.dumps({"merchant": "BLUE"}, **DUMPS[style])[len(output) :]  # ``\n}``
    want = "" if style == "compact" else want  # no output spaced: drafted compact, no ``}``
    assert tokenizer.decode(drafter._encode(matcher, last, {}, reading)) == want
    unseen = Drafter(SpeculativeConfig(num_speculative_tokens=8), tokenizer)
    fresh = Spaced()
    unseen.spacing.update(fresh, output)
    assert unseen._encode(matcher, last, {}, fresh) == []  # no output ended so before


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


def test_a_request_whose_drafts_fail_drafts_only_where_surer(tokenizer):
    """The chances are priors: free chat on a model whose drafts are rarely right stops paying
    for the weak lookups, and keeps the long ones while they hold up."""
    drafter = Drafter(SpeculativeConfig(num_speculative_tokens=8), tokenizer)
    seq = Sequence(1, "r", 0, [1, 2], 2, SamplingParams(temperature=0), 256, torch.Generator())
    seq.num_computed_tokens = 2
    drafter.proposer = FixedLookup(list(range(100, 108)), 2)
    assert drafter.drafts(seq)  # a 2-token match: drafted on trust
    for _ in range(4):
        drafter.observe(seq, 4, 0)
    assert drafter.drafts(seq) == []
    drafter.proposer = FixedLookup(list(range(100, 108)), 4)
    assert 0 < len(drafter.drafts(seq)) < 8  # a long match: drafted, a shorter chain
    other = Sequence(2, "s", 0, [1, 2], 2, SamplingParams(temperature=0), 256, torch.Generator())
    other.num_computed_tokens = 2
    assert drafter.drafts(other) == list(range(100, 108))  # another request: its own count


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
