"""Guided decoding through the engine: every output that finishes with "stop" satisfies its
constraint (checked by independent oracles), constrained and unconstrained requests share one batch
without affecting each other, and preemption / prefix caching keep matchers consistent."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import jsonschema
import lark
import pytest

from stencil import SamplingParams
from stencil.constraints import Constraint, ConstraintError, translate
from stencil.testing.tiny_models import TEST_KV_BYTES, make_llm

LIBRARY = Path(__file__).resolve().parents[2] / "stencil" / "extract" / "schemas"
BENCH = ("jsonschemabench-dev/Github_easy.jsonl", "jsonschemabench-dev/Glaiveai2K.jsonl")
REGEXES = [
    r"[0-9]{3}-[0-9]{4}",
    r"[a-z]+@[a-z]+\.(com|org)",
    r"(yes|no)( indeed)?",
    r"[A-Z][a-z]{2,8} [0-9]{1,2}",
]
CHOICES = [["red", "green", "blue"], ["positive", "negative", "neutral"], ["A", "BB", "CCC"]]
GRAMMAR = r"""
start: expr
expr: term (("+" | "-") term)*
term: NUMBER | "(" expr ")"
NUMBER: /[0-9]{1,3}/
"""


CHECKED = [  # one schema per keyword enforced by a decode-time check (see docs/constraints.md)
    {
        "type": "array",
        "items": {"type": "string", "maxLength": 3},
        "uniqueItems": True,
        "maxItems": 4,
    },
    {"oneOf": [{"type": "integer", "multipleOf": 2}, {"type": "integer", "multipleOf": 3}]},
    {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
        "required": ["a"],
        "if": {"properties": {"a": {"minimum": 5}}},
        "then": {"required": ["b"]},
        "else": {"properties": {"b": {"maxLength": 2}}},
    },
    {
        "type": "array",
        "items": {"type": "integer"},
        "maxItems": 4,
        "not": {"items": {"minimum": 3}},
    },
    {
        "type": "array",
        "items": {"type": "integer"},
        "contains": {"minimum": 50},
        "maxContains": 2,
        "maxItems": 5,
    },
    {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "additionalProperties": {"type": "boolean"},
        "maxProperties": 2,
    },
    {
        "type": "object",
        "propertyNames": {"maxLength": 2},
        "additionalProperties": {"type": "integer"},
    },
    {"type": "string", "pattern": "^(?!ab)[a-c]{2,4}$"},
    {
        "type": "object",
        "required": ["r", "u"],
        "properties": {
            "r": {"type": "string", "format": "uri-reference", "maxLength": 6},
            "u": {"type": "string", "format": "uuid"},
        },
    },
    {
        "type": "object",
        "properties": {"v": {"type": "integer"}, "next": {"$ref": "#", "required": ["v"]}},
        "maxProperties": 2,
    },
    {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "anyOf": [{"properties": {"b": {"type": "boolean"}}}],
        "unevaluatedProperties": False,
    },
]


def _library_schemas() -> list[dict]:
    """The shipped extraction schemas (``stencil/extract/schemas``)."""
    return [json.loads(p.read_text()) for p in sorted(LIBRARY.glob("*.json"))]


def _corpus_schemas(corpus_dir: Path) -> list[dict]:
    """JSONSchemaBench-dev's real-world schemas (the ``corpus`` suite's ``--corpus-dir``)."""
    rows = []
    for name in BENCH:
        with open(corpus_dir / name) as f:
            rows += [json.loads(line)["schema"] for line in f]
    return rows


def _compilable(rows: list[dict], n: int, seed: int) -> list[dict]:
    """``n`` schemas of ``rows`` that translate, in a seeded order (repeating ``rows`` if short)."""
    rows = rows * (n // len(rows) + 1)
    random.Random(seed).shuffle(rows)
    picked = []
    for schema in rows:
        try:
            translate(Constraint.json_schema(schema))
        except ConstraintError:
            continue
        picked.append(schema)
        if len(picked) == n:
            break
    return picked


def _mix(n: int, seed: int, rows: list[dict] | None = None) -> list[tuple[Constraint, object]]:
    """(constraint, oracle) pairs: JSON schemas of ``rows`` (the library's by default), the
    decode-time-checked ones, regexes, choices, a grammar."""
    rng = random.Random(seed)
    schemas = _compilable(rows or _library_schemas(), max(n // 2, 1), seed)
    parser = lark.Lark(GRAMMAR, start="start")
    out = []
    for i in range(n):
        kind = i % 4
        if i % 8 == 1:  # a keyword checked as values complete
            schema = CHECKED[i // 8 % len(CHECKED)]
            out.append((Constraint.json_schema(schema), ("checked", schema)))
        elif kind in (0, 1) and schemas:
            schema = schemas[i // 2 % len(schemas)]
            out.append((Constraint.json_schema(schema), ("json", schema)))
        elif kind == 2 and i % 8 == 2:
            choices = rng.choice(CHOICES)
            out.append((Constraint.choice(choices), ("choice", choices)))
        elif kind == 2:
            pattern = rng.choice(REGEXES)
            out.append((Constraint.regex(pattern), ("regex", pattern)))
        else:
            out.append((Constraint.grammar(GRAMMAR), ("grammar", parser)))
    return out


def _valid(text: str, oracle) -> bool:
    kind, spec = oracle
    if kind == "checked":
        validator = jsonschema.Draft202012Validator(spec, format_checker=jsonschema.FormatChecker())
        try:
            return validator.is_valid(json.loads(text))
        except ValueError:
            return False
    if kind == "json":
        try:
            jsonschema.validate(json.loads(text), spec)
        except (ValueError, jsonschema.ValidationError):
            return False
        return True
    if kind == "regex":
        return re.fullmatch(spec, text) is not None
    if kind == "choice":
        return text in spec
    try:
        spec.parse(text)
    except lark.LarkError:
        return False
    return True


@pytest.fixture(scope="module")
def tiny_llm(tiny_models):
    return make_llm(tiny_models["llama-tied"], block_size=8, num_kv_blocks=512, max_model_len=512)


def test_200_sampled_constrained_requests_all_valid(tiny_llm):
    _check_sampled(tiny_llm, _mix(200, seed=1))


@pytest.mark.corpus
def test_200_sampled_requests_over_jsonschemabench_all_valid(tiny_llm, corpus_dir):
    _check_sampled(tiny_llm, _mix(200, seed=1, rows=_corpus_schemas(corpus_dir)))


def _check_sampled(tiny_llm, mix: list[tuple[Constraint, object]]) -> None:
    """Every output that stops satisfies its oracle; enough stop to make that mean something."""
    params = [
        SamplingParams(temperature=1.0, seed=i, max_tokens=96, constraint=c)
        for i, (c, _) in enumerate(mix)
    ]
    prompts = [[1 + i % 50, 7, 9, 11] for i in range(len(mix))]
    outs = tiny_llm.generate(prompts, params, use_tqdm=False)
    stops, checked = 0, 0
    for out, (_, oracle) in zip(outs, mix, strict=True):
        c = out.outputs[0]
        if c.finish_reason == "error":  # only a decode-time check may leave no continuation
            assert oracle[0] == "checked" and "decode-time check" in c.error, c.error
            continue
        assert c.finish_reason in ("stop", "length"), c.error
        if c.finish_reason == "stop":
            stops += 1
            checked += oracle[0] == "checked"
            assert _valid(c.text, oracle), (oracle[0], c.text)
    assert stops >= 100, f"only {stops} of 200 finished; the test checks too little"
    assert checked >= 12, f"only {checked} of 25 checked-keyword requests finished"


# compiles, but every digit the grammar allows is refused by the decode-time check: the matcher
# is left with no continuation after the first token, whatever the model writes
DOOMED = Constraint.json_schema(
    {"type": "integer", "minimum": 0, "maximum": 9, "not": {"type": "integer"}}
)


def test_unconstrained_rows_unchanged_by_constrained_neighbours(tiny_llm):
    """Constrained neighbours, and one whose constraint fails mid-generation, change nothing in
    the other rows: the failing one finishes "error" (a constraint error, a 400 in the server),
    the rest are token for token what they are without it."""
    greedy = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)
    prompts = [[5, 6, 7, 8], [9, 10, 11], [12, 13, 14, 15, 16]]
    alone = [o.outputs[0].token_ids for o in tiny_llm.generate(prompts, greedy, use_tqdm=False)]
    mix = _mix(6, seed=2)
    params = [greedy] * 3 + [
        SamplingParams(temperature=0, max_tokens=24, constraint=c) for c, _ in mix
    ]
    together = tiny_llm.generate(prompts + [[3, 4]] * 6, params, use_tqdm=False)
    assert [o.outputs[0].token_ids for o in together[:3]] == alone
    doomed = SamplingParams(temperature=0, max_tokens=24, constraint=DOOMED)
    failing = tiny_llm.generate(
        [[3, 4], *prompts, *[[3, 4]] * 6], [doomed, *params], use_tqdm=False
    )
    c = failing[0].outputs[0]
    assert c.finish_reason == "error" and c.error_type == "constraint", c
    assert "no continuation satisfies 'not'" in c.error
    assert [o.outputs[0].token_ids for o in failing[1:]] == [
        o.outputs[0].token_ids for o in together
    ]


def test_preemption_and_prefix_caching_keep_matchers_consistent(tiny_models):
    mix = _mix(12, seed=3)
    prompts = [[1, 2, 3, 4, 5, 6, 7, 8, 9, i] for i in range(len(mix))]  # shared prefix
    params = [SamplingParams(temperature=0, max_tokens=48, constraint=c) for c, _ in mix]
    roomy = make_llm(
        tiny_models["llama-tied"],
        block_size=4,
        num_kv_blocks=1024,
        max_model_len=128,
        enable_prefix_caching=False,
    )
    tight = make_llm(
        tiny_models["llama-tied"],
        block_size=4,
        num_kv_blocks=30,
        max_model_len=128,
        max_num_batched_tokens=16,
    )
    want = roomy.generate(prompts, params, use_tqdm=False)
    got = tight.generate(prompts, params, use_tqdm=False)
    assert tight.get_metrics()["num_preemptions_total"] > 0
    assert tight.get_metrics()["prefix_cache_hits_total"] > 0
    for w, g, (_, oracle) in zip(want, got, mix, strict=True):
        assert g.outputs[0].token_ids == w.outputs[0].token_ids
        if g.outputs[0].finish_reason == "stop":
            assert _valid(g.outputs[0].text, oracle)


def test_n_siblings_each_follow_the_constraint(tiny_llm):
    c = Constraint.regex(r"[0-9]{2,4}(-[a-z]{2})?")
    out = tiny_llm.generate(
        [[4, 5, 6]],
        SamplingParams(n=4, temperature=1.0, seed=5, max_tokens=16, constraint=c),
        use_tqdm=False,
    )[0]
    texts = [o.text for o in out.outputs]
    assert all(re.fullmatch(r"[0-9]{2,4}(-[a-z]{2})?", t) for t in texts), texts
    assert len(set(texts)) > 1


def test_jump_forward_skips_forced_tokens(tiny_llm):
    schema = {
        "type": "object",
        "properties": {
            "first_name": {"type": "string", "maxLength": 8},
            "last_name": {"type": "string", "maxLength": 8},
        },
        "required": ["first_name", "last_name"],
        "additionalProperties": False,
    }
    before = tiny_llm.get_metrics()["jump_forward_tokens_total"]
    out = tiny_llm.generate(
        [[7, 8]],
        SamplingParams(temperature=0, max_tokens=80, constraint=Constraint.json_schema(schema)),
        use_tqdm=False,
    )
    text = out[0].outputs[0].text
    assert out[0].outputs[0].finish_reason == "stop", text
    jsonschema.validate(json.loads(text), schema)
    assert tiny_llm.get_metrics()["jump_forward_tokens_total"] > before
    params = SamplingParams(
        temperature=0, max_tokens=80, constraint=Constraint.json_schema(schema), logprobs=3
    )
    before = tiny_llm.get_metrics()["jump_forward_tokens_total"]
    (c,) = tiny_llm.generate([[7, 8]], params, use_tqdm=False)[0].outputs
    forced = tiny_llm.get_metrics()["jump_forward_tokens_total"] - before
    # logprobs name every token, a forced one with logprob 0, its only alternative itself
    assert c.text == text and [p.chosen.token_id for p in c.logprobs] == c.token_ids
    sure = [p for p in c.logprobs if [t.token_id for t in p.top] == [p.chosen.token_id]]
    assert forced > 0 and len(sure) >= forced and all(p.chosen.logprob == 0 for p in sure)


def test_raw_logprobs_are_the_models_own_before_the_mask(tiny_llm):
    """``logprobs_mode="raw_logprobs"``: at every position (none is jumped forward) the top
    tokens and their logprobs are the unconstrained model's at the same prefix (oracle: an
    unconstrained request of one token from there); the output still matches its constraint;
    where it agrees with the processed mode's, a token the mask pushed on the model has its raw
    logprob at most its processed one."""
    schema = {"type": "array", "items": {"enum": ["alpha", "beta gamma", "delta"]}}
    prompt = [7, 8]

    def run(mode: str):
        params = SamplingParams(
            temperature=0, max_tokens=40, logprobs=4, logprobs_mode=mode,
            constraint=Constraint.json_schema(schema),
        )  # fmt: skip
        return tiny_llm.generate([prompt], params, use_tqdm=False)[0].outputs[0]

    processed, raw = run("processed_logprobs"), run("raw_logprobs")
    jsonschema.validate(json.loads(raw.text), schema)
    free = SamplingParams(temperature=0, max_tokens=1, logprobs=4)
    masked = 0
    for j, r in enumerate(raw.logprobs):
        (alone,) = tiny_llm.generate([prompt + raw.token_ids[:j]], free, use_tqdm=False)
        want = alone.outputs[0].logprobs[0].top
        assert [t.token_id for t in r.top] == [t.token_id for t in want]
        assert [t.logprob for t in r.top] == pytest.approx([t.logprob for t in want], abs=1e-4)
        masked += [t.token_id for t in r.top][:1] != [r.chosen.token_id]
    assert masked >= 1, "no position where the mask pushed a token on the model"
    for j, p in enumerate(processed.logprobs):
        if processed.token_ids[: j + 1] != raw.token_ids[: j + 1]:
            break
        assert raw.logprobs[j].chosen.logprob <= p.chosen.logprob + 1e-6


def test_length_inside_structure_reports_length(tiny_llm):
    schema = {
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"type": "string"}, "minItems": 30}},
        "required": ["items"],
    }
    out = tiny_llm.generate(
        [[7, 8]],
        SamplingParams(temperature=0, max_tokens=8, constraint=Constraint.json_schema(schema)),
        use_tqdm=False,
    )
    assert out[0].outputs[0].finish_reason == "length"


def test_embedded_model_extracts_ada(default_model_dir):
    from stencil import LLM

    llm = LLM(num_threads=2, kv_cache_memory=TEST_KV_BYTES)
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name", "age"],
    }
    msgs = [
        {"role": "user", "content": "Extract the person as JSON: 'Ada Lovelace was 36 years old.'"}
    ]
    out = llm.chat(
        msgs,
        SamplingParams(temperature=0, max_tokens=40, constraint=Constraint.json_schema(schema)),
        use_tqdm=False,
    )
    c = out[0].outputs[0]
    assert c.finish_reason == "stop"
    data = json.loads(c.text)
    jsonschema.validate(data, schema)
    assert data["name"] == "Ada Lovelace"


def test_close_on_length_too_small_a_budget_generates_as_plain_max_tokens(tiny_llm):
    """No closing path fits 4 tokens: the output is what plain max_tokens gives, never emptied."""
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name", "age"],
    }
    outs = {}
    for close in (False, True):
        params = [
            SamplingParams(
                temperature=1.0,
                seed=s,
                max_tokens=4,
                close_on_length=close,
                constraint=Constraint.json_schema(schema),
            )
            for s in range(4)
        ]
        outs[close] = [
            o.outputs[0] for o in tiny_llm.generate([[3, 4, 5]] * 4, params, use_tqdm=False)
        ]
    for plain, closing in zip(outs[False], outs[True], strict=True):
        assert closing.token_ids == plain.token_ids and len(closing.token_ids) == 4
        assert closing.finish_reason == plain.finish_reason == "length"


@pytest.mark.parametrize("max_tokens", [12, 20, 40])
def test_close_on_length_finishes_structures_validly(tiny_llm, max_tokens):
    schema = {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
                    "required": ["a", "b"],
                },
            }
        },
        "required": ["items"],
    }
    params = [
        SamplingParams(
            temperature=1.0,
            seed=s,
            max_tokens=max_tokens,
            close_on_length=True,
            constraint=Constraint.json_schema(schema),
        )
        for s in range(8)
    ]
    outs = tiny_llm.generate([[3, 4, 5]] * 8, params, use_tqdm=False)
    for o in outs:
        c = o.outputs[0]
        assert c.finish_reason == "stop", (c.finish_reason, c.text)
        assert len(c.token_ids) <= max_tokens
        jsonschema.validate(json.loads(c.text), schema)


def test_close_on_length_keeps_an_output_that_fits_the_budget(tiny_llm):
    """A budget exactly as long as the natural output changes nothing; one token less ends in a
    valid close that is no longer than the budget."""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 12},
            "age": {"type": "integer", "maximum": 120},
        },
        "required": ["name", "age"],
        "additionalProperties": False,
    }

    def run(max_tokens: list[int], close: bool):
        params = [
            SamplingParams(
                temperature=1.0,
                seed=s,
                max_tokens=m,
                close_on_length=close,
                constraint=Constraint.json_schema(schema),
            )
            for s, m in enumerate(max_tokens)
        ]
        return [
            o.outputs[0]
            for o in tiny_llm.generate([[3, 4, 5]] * len(params), params, use_tqdm=False)
        ]

    natural = run([200] * 6, False)
    assert all(c.finish_reason == "stop" for c in natural)
    lengths = [len(c.token_ids) for c in natural]
    for fit, c in zip(run(lengths, True), natural, strict=True):
        assert fit.token_ids == c.token_ids and fit.finish_reason == "stop"
    for short, n in zip(run([n - 1 for n in lengths], True), lengths, strict=True):
        assert short.finish_reason == "stop" and len(short.token_ids) <= n - 1, short.text
        jsonschema.validate(json.loads(short.text), schema)
