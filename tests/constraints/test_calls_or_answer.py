"""``Constraint.calls_or_answer``: tool calls or a JSON answer in one grammar. Its language is
the union of the calls grammar alone and the answer's ``json_schema`` constraint alone, which
are the oracles here: along every output, the union's mask holds the masks of the branches
still alive (decode-time checks included: ``BranchMatcher``), every token of it is taken, and
``jsonschema`` agrees with what the union accepts. The call syntaxes are the server's
(``tools.formats``: SmolLM2's, Hermes' in its tags and in a code block, Llama 3.1's bare JSON)
on SmolLM2's vocabulary."""

from __future__ import annotations

import json
import random

import jsonschema
import pytest
import torch
from constraint_helpers import allowed

from stencil.api.openai.protocol import Tool
from stencil.api.tools.formats import FORMATS
from stencil.constraints import Constraint, ConstraintError
from stencil.constraints.branch_matcher import ANSWER, CALLS, BranchMatcher
from stencil.testing.tool_specs import CITY_WEATHER

WEATHER = Tool.model_validate(CITY_WEATHER)
PLAIN = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "city": {"type": "string"}},
    "required": ["name", "city"],
}
CHECKED = {  # a set: uniqueItems is checked as the array completes
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
    },
    "required": ["name", "tags"],
}
CALL_SCHEMA = {  # a call's oracle
    "type": "object",
    "properties": {"name": {"const": "get_weather"},
                   "arguments": WEATHER.function.parameters},
    "required": ["name", "arguments"],
}  # fmt: skip
CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
CALLS_TEXT = {  # one call as each syntax writes it
    "smollm2": f"<tool_call>[{CALL}]</tool_call>",
    "hermes": f"<tool_call>\n{CALL}\n</tool_call>",
    "hermes_fence": f"```json\n{CALL}\n```",
    "llama3_json": CALL.replace("arguments", "parameters"),
}
ANSWERS = {
    "plain": ('{"name": "get_weather", "city": "Paris"}', '{"name": "x", "city": 3}'),
    "checked": ('{"name": "get_weather", "tags": ["a", "b"]}', '{"name": "x", "tags": ["a", "a"]}'),
}
SCHEMAS = {"plain": PLAIN, "checked": CHECKED}


def _parts(fmt_name: str, schema: dict) -> dict[str, Constraint]:
    fmt = FORMATS[fmt_name.removesuffix("_fence")]
    union, calls, rules = fmt.calls_or_answer_grammar([WEATHER], single=True, tokens={})
    answer = Constraint.json_schema(schema)
    return {
        "union": Constraint.calls_or_answer(
            union, json_rules=rules, answer=answer, calls_only=calls
        ),
        "calls": Constraint.grammar(calls, json_rules=rules),
        "answer": answer,
    }


def _walk(compiler, tokenizer, vocab, parts, text: str) -> tuple[bool, list[str]]:
    """Feed ``text`` + EOS to the union and to each branch alone (a branch is alive until it
    refuses a token). At every step the union's mask must hold every live branch's mask, and
    the union must take each token its mask allows (100 tried per step, each undone). Returns
    (the union took all of ``text``, the steps where either failed)."""
    union = compiler.compile(parts["union"]).new_matcher()
    branches = [compiler.compile(parts[b]).new_matcher() for b in ("calls", "answer")]
    ids = tokenizer.encode(text, add_special_tokens=False) + [vocab.eos_token_ids[0]]
    rng, wrong = random.Random(0), []
    for i, t in enumerate(ids):
        mask = allowed(union, vocab)
        if not set(mask) >= set().union(*(allowed(b, vocab) for b in branches)):
            wrong.append(f"step {i}: a branch allows a token the union does not")
        for x in rng.sample(mask, min(len(mask), 100)):
            if not union.accept_token(x):
                wrong.append(f"step {i}: token {x} in the mask is refused")
            elif x not in vocab.eos_token_ids:
                union.rollback(1)
        if union.is_terminated() and t in vocab.eos_token_ids:
            break
        if not union.accept_token(t):
            return False, wrong
        branches = [b for b in branches if b.accept_token(t)]
    return True, wrong


@pytest.mark.parametrize("fmt_name", list(CALLS_TEXT))
@pytest.mark.parametrize("schema_name", list(SCHEMAS))
def test_the_union_is_the_branches_alone(smol_compiler, smol_tokenizer, smol_vocab, fmt_name,
                                         schema_name):  # fmt: skip
    parts = _parts(fmt_name, SCHEMAS[schema_name])
    good, bad = ANSWERS[schema_name]
    validator = jsonschema.Draft202012Validator(SCHEMAS[schema_name])  # the answer's oracle
    assert validator.is_valid(json.loads(good)) and not validator.is_valid(json.loads(bad))
    for text, valid in ((CALLS_TEXT[fmt_name], True), (good, True), (bad, False)):
        ok, wrong = _walk(smol_compiler, smol_tokenizer, smol_vocab, parts, text)
        assert ok == valid and not wrong, (text, wrong)


@pytest.mark.parametrize("fmt_name", list(CALLS_TEXT))
def test_no_mixing_and_no_leading_whitespace_but_json_s(smol_compiler, smol_tokenizer, fmt_name):
    """An answer then a call, or a call then an answer, is refused; so is leading whitespace,
    except in ``llama3_json`` where both branches are bare JSON: JSON's own whitespace (within
    the bound) may lead there, and the text is still JSON that the schema validates."""
    compiled = smol_compiler.compile(_parts(fmt_name, CHECKED)["union"])
    eos = compiled.vocab.eos_token_ids[0]
    good, call = ANSWERS["checked"][0], CALLS_TEXT[fmt_name]
    cases = {good + call: False, call + good: False, " " + good: fmt_name == "llama3_json"}
    cases["\n" + call] = fmt_name == "llama3_json"
    cases[f"```json\n{good}\n```"] = False  # the answer is bare JSON, never in a code block
    if fmt_name == "hermes_fence":  # the call in a code block is checked as in the tags
        for bad in (
            '{"name": "get_weather", "arguments": {"town": "Paris"}}',
            '{"name": "multiply", "arguments": {}}',
            CALL.replace("Paris", "Paris, France!"),
        ):
            assert not jsonschema.Draft202012Validator(CALL_SCHEMA).is_valid(json.loads(bad))
            cases[f"```json\n{bad}\n```"] = False  # fmt: skip
    for text, valid in cases.items():
        m = compiled.new_matcher()
        ids = smol_tokenizer.encode(text, add_special_tokens=False)
        assert (all(m.accept_token(t) for t in ids) and m.accept_token(eos)) == valid, repr(text)
    jsonschema.validate(json.loads(" " + good), CHECKED)


def test_branch_matcher_follows_the_branches(smol_compiler, smol_tokenizer, smol_vocab):
    """Checked answers use ``BranchMatcher``: the branch at each position, rollback across the
    decision, reset, and a check failure inside the answer while a call is out of reach."""
    compiled = smol_compiler.compile(_parts("llama3_json", CHECKED)["union"])
    m = compiled.new_matcher()
    assert isinstance(m, BranchMatcher) and m.branch == ANSWER
    enc = lambda s: smol_tokenizer.encode(s, add_special_tokens=False)  # noqa: E731
    call, answer = enc(CALLS_TEXT["llama3_json"]), enc(ANSWERS["checked"][0])
    first = allowed(m, smol_vocab)
    assert all(m.accept_token(t) for t in call) and m.branch == CALLS
    m.rollback(len(call))
    assert m.branch == ANSWER and allowed(m, smol_vocab) == first
    assert all(m.accept_token(t) for t in answer) and m.branch == ANSWER and m.is_accepting()
    m.reset()
    assert allowed(m, smol_vocab) == first
    dup = enc(ANSWERS["checked"][1])
    taken = 0
    for t in dup:
        if not m.accept_token(t):
            break
        taken += 1
    assert taken < len(dup) and smol_vocab.eos_token_ids[0] not in allowed(m, smol_vocab)
    bitmask = torch.zeros((1, (smol_vocab.vocab_size + 31) // 32), dtype=torch.int32)
    m.fill_next_token_bitmask(bitmask, 0)
    assert m.error() is None  # a continuation (another item) remains


def test_the_answer_must_be_an_ungrounded_json_schema():
    for answer in (
        Constraint.regex("a"),
        Constraint.json_schema(PLAIN, source_text="Paris", ground_strings=True),
    ):
        with pytest.raises(ConstraintError, match="ungrounded JSON schema"):
            Constraint.calls_or_answer(
                "start: answer", json_rules={}, answer=answer, calls_only="start: answer"
            )
