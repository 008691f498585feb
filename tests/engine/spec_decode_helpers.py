"""The request set the speculative decoding tests share (one prompt set, one request per
constraint kind and prompt) and the check both methods (prompt lookup, draft model) pass under
preemption."""

from __future__ import annotations

from stencil import SamplingParams
from stencil.api.openai.protocol import Tool
from stencil.api.tools.formats import HERMES
from stencil.constraints import Constraint
from stencil.testing.tool_specs import CITY_WEATHER

DOC = (
    "Invoice 4471 from Acme Tools Ltd, 12 Harbour Road, Leeds. Date 2024-03-05. Total due: "
    "1250.00 GBP. Contact: Maria Lopez, maria.lopez@acme-tools.example. Acme Tools Ltd thanks you."
)
SCHEMA = {
    "type": "object",
    "properties": {
        "vendor": {"type": "string"},
        "contact": {"type": "string"},
        "email": {"type": "string"},
        "total": {"type": "number"},
    },
    "required": ["vendor", "contact", "email", "total"],
}
GRAMMAR = r"""
start: item ("," item)*
item: WORD "=" NUMBER
WORD: /[a-z]{1,6}/
NUMBER: /[0-9]{1,3}/
"""
WEATHER = Tool.model_validate(CITY_WEATHER)
ANSWER = {  # uniqueItems: a decode-time check, so the union's matcher follows both branches
    "type": "object",
    "properties": {
        "vendor": {"type": "string", "maxLength": 24},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "uniqueItems": True},
    },
    "required": ["vendor", "tags"],
}
UNION, CALLS, RULES = HERMES.calls_or_answer_grammar([WEATHER], single=False, tokens={})
CALLS_OR_ANSWER = Constraint.calls_or_answer(  # as the server builds it: Hermes calls or ANSWER
    UNION, json_rules=RULES, answer=Constraint.json_schema(ANSWER), calls_only=CALLS
)
CONSTRAINTS = {
    "unconstrained": None,
    "json_schema": Constraint.json_schema(SCHEMA),
    "regex": Constraint.regex(r"(Acme|Tools|Ltd| |[0-9]{1,4}){4,24}"),
    "grammar": Constraint.grammar(GRAMMAR),
    "grounded": Constraint.json_schema(SCHEMA, source_text=DOC, ground_strings=True),
    "calls_or_answer": CALLS_OR_ANSWER,
}
PROMPTS = [f"Extract the invoice: {DOC}", "a b a b a b a b", "Acme Tools Ltd, Acme Tools Ltd, Acme"]
WEATHER_PROMPT = (
    'To look up the weather, write <tool_call>\n{"name": "get_weather", "arguments": '
    '{"city": "Leeds"}}\n</tool_call> or ```json\n{"name": "get_weather", "arguments": '
    '{"city": "Leeds"}}\n```; else answer as JSON with vendor and tags.\n\n'
    f"Weather in Leeds? Or the vendor of: {DOC}"
)


def requests() -> tuple[list[SamplingParams], list[str]]:
    """(params, prompts): greedy, 48 tokens, each constraint kind on each prompt."""
    return [
        SamplingParams(temperature=0, max_tokens=48, constraint=c, ignore_eos=c is None)
        for c in CONSTRAINTS.values()
        for _ in PROMPTS
    ], [p for _ in CONSTRAINTS for p in PROMPTS]


def tokens(llm, prompts, params) -> list[list[int]]:
    return [o.outputs[0].token_ids for o in llm.generate(prompts, params, use_tqdm=False)]


def check_greedy_identity_batched(plain, spec) -> None:
    """``requests()`` 3 at a time (under the auto-disable size: drafting), then all 15 (over
    it: not), each batch decoding ``plain``'s tokens, with prefix-cache hits."""
    params, prompts = requests()
    for lo in range(0, len(params), 3):
        want = tokens(plain, prompts[lo : lo + 3], params[lo : lo + 3])
        assert tokens(spec, prompts[lo : lo + 3], params[lo : lo + 3]) == want
    assert tokens(spec, prompts, params) == tokens(plain, prompts, params)
    assert spec.get_metrics()["prefix_cache_hits_total"] > 0
    spec.engine.block_manager.check_integrity([])


def check_greedy_identity_under_preemption(plain, spec) -> None:
    """Four 40-token requests (two unconstrained, a regex, a grammar) on a KV cache too small
    for them all: ``spec`` preempts and drafts, and decodes ``plain``'s tokens; its target's
    blocks are all free after."""
    params = [
        SamplingParams(temperature=0, max_tokens=40, ignore_eos=True, constraint=c)
        for c in (None, CONSTRAINTS["regex"], None, CONSTRAINTS["grammar"])
    ]
    prompts = [PROMPTS[1], PROMPTS[2], PROMPTS[2], PROMPTS[1]]
    assert tokens(spec, prompts, params) == tokens(plain, prompts, params)
    assert spec.get_metrics()["num_preemptions_total"] > 0
    assert spec.get_metrics()["spec_decode_num_draft_tokens_total"] > 0
    spec.engine.block_manager.check_integrity([])
