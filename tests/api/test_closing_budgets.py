"""Every constrained output closes within its budget where a closing path exists.

For each kind of constraint the server takes (json_object, json_schema, a forced tool call, regex,
grammar, choice), requests at every budget from 1 token up: below the smallest budget that can hold
a valid output the answer is ``finish_reason: "length"`` (as OpenAI's); from the first budget that
closes, every larger one closes too (``"stop"`` / ``"tool_calls"``), within the budget, valid by an
independent oracle (``jsonschema``, ``re``, ``lark``). That first budget is at most ``slack`` of the
token count of the shortest valid output as the tokenizer writes it. Deeply nested outputs (forced with
``logit_bias``), whose closing path is longer than the close search's fixed window, close too.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import jsonschema
import lark
import pytest

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}
TOOL = {"type": "function", "function": {"name": "f", "parameters": PERSON}}
REGEX = r"[a-z]+@[a-z]+\.com"
GRAMMAR = 'start: "(" start* ")"'
NESTED = {
    "$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}},
    "type": "object",
    "properties": {"a": {"$ref": "#/$defs/n"}},
    "required": ["a"],
}
PROMPT = "Write a very long and detailed answer about Ada Lovelace, her life and her work."


@dataclass(frozen=True)
class Kind:
    name: str
    body: dict[str, Any]
    shortest: str  # a shortest valid output: its token count bounds the smallest closing budget

    def valid(self, text: str) -> bool:
        try:
            if self.name == "json_object":
                return isinstance(json.loads(text), dict)
            if self.name in ("json_schema", "nested"):
                jsonschema.validate(
                    json.loads(text), PERSON if self.name == "json_schema" else NESTED
                )
            elif self.name == "tools":
                jsonschema.validate(json.loads(text), PERSON)
            elif self.name == "regex":
                return re.fullmatch(REGEX, text) is not None
            elif self.name in ("grammar", "parens"):
                lark.Lark(GRAMMAR).parse(text)
            elif self.name == "choice":
                return text in ("yes", "no")
        except (ValueError, jsonschema.ValidationError, lark.LarkError):
            return False
        return True


KINDS = [
    Kind("json_object", {"response_format": {"type": "json_object"}}, "{}"),
    Kind(
        "json_schema",
        {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "P", "schema": PERSON},
            }
        },
        '{"name":"","age":0}',
    ),
    Kind(
        "tools",
        {"tools": [TOOL], "tool_choice": {"type": "function", "function": {"name": "f"}}},
        '[{"name":"f","arguments":{"name":"","age":0}}]',
    ),
    Kind("regex", {"guided_regex": REGEX}, "a@a.com"),
    Kind("grammar", {"guided_grammar": GRAMMAR}, "()"),
    Kind("choice", {"guided_choice": ["yes", "no"]}, "no"),
]


def slack(n: int) -> int:
    """The budget by which a structure whose shortest valid output takes ``n`` tokens closes: the
    close search writes forced keys token by token and brackets one at a time, and a forced
    first token (``{``, ``(``) cannot merge with its closer, so up to twice as many, plus one."""
    return 2 * n + 1


def ask(server, kind: Kind, budget: int, **extra: Any) -> dict[str, Any]:
    import httpx

    body = {
        "model": server.model,
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": budget,
        "temperature": 1.0,
        "seed": budget,
        **kind.body,
        **extra,
    }
    headers = {"Authorization": f"Bearer {server.api_key}"}
    r = httpx.post(f"{server.v1}/chat/completions", json=body, headers=headers, timeout=600)
    assert r.status_code == 200, r.text
    return r.json()


def output_text(kind: Kind, resp: dict[str, Any]) -> str:
    msg = resp["choices"][0]["message"]
    if kind.name == "tools" and msg.get("tool_calls"):
        return msg["tool_calls"][0]["function"]["arguments"]
    return msg["content"] or ""


@pytest.fixture(scope="module")
def budgets(live_server, tokenizer_of) -> dict[str, list[tuple[int, dict[str, Any]]]]:
    """Every kind at budgets 1 .. shortest + 2, slack(shortest) and 48, asked concurrently."""
    jobs = []
    for kind in KINDS:
        n = len(tokenizer_of(kind.shortest))
        jobs += [(kind, b) for b in sorted({*range(1, n + 3), slack(n), 48})]
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda job: ask(live_server, *job), jobs))
    out: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for (kind, budget), resp in zip(jobs, answers, strict=True):
        out.setdefault(kind.name, []).append((budget, resp))
    return out


@pytest.fixture(scope="module")
def tokenizer_of(live_server):
    tok = live_server.engine.tokenizer
    return lambda text: tok.encode(text, add_special_tokens=False)


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_closes_from_the_smallest_budget_up(kind, budgets, tokenizer_of):
    closed = "tool_calls" if kind.name == "tools" else "stop"
    seen_close = None
    for budget, resp in budgets[kind.name]:
        reason = resp["choices"][0]["finish_reason"]
        used = resp["usage"]["completion_tokens"]
        assert used <= budget, (budget, resp)
        if seen_close is None and reason == "length":
            assert used == budget, (budget, resp)
            continue
        assert reason == closed, (budget, resp)  # once one budget closes, every larger one does
        seen_close = seen_close or budget
        assert kind.valid(output_text(kind, resp)), (budget, resp)
    assert seen_close is not None and seen_close <= slack(len(tokenizer_of(kind.shortest)))


@pytest.mark.parametrize(
    ("name", "body", "opener"),
    [
        ("nested", {"guided_json": NESTED}, "["),
        ("parens", {"guided_grammar": GRAMMAR}, "("),
    ],
)
def test_deep_nesting_closes(live_server, tokenizer_of, name, body, opener):
    """The model pushed to open brackets (logit_bias) nests deeper than the close search's window
    (32 tokens): the closing path is measured ahead, so the output still closes in budget."""
    kind = Kind(name, body, "")
    bias = {str(t): 30 for t in {*tokenizer_of(opener), *tokenizer_of(opener * 2)}}
    resp = ask(live_server, kind, 120, temperature=0.0, logit_bias=bias)
    text = output_text(kind, resp)
    assert resp["choices"][0]["finish_reason"] == "stop", resp
    assert resp["usage"]["completion_tokens"] <= 120
    assert text.count(opener) > 40, text  # deeper than the window
    assert kind.valid(text), text
