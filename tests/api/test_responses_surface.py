"""Every field of the SDK's ``ResponseCreateParams``, sent through the real ``openai`` client to
the app over a fake engine: honoured and advisory fields are accepted, the template field reaches
the chat template (else a 400), refused fields and built-in tools are 400s naming the field and
saying why. The field list comes from the installed SDK, so a field a new version adds fails here
until ``stencil/api/responses_api/surface.py`` and docs/server.md classify it. Also: stored
responses never cross API keys, and the store's LRU bounds."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import openai
import pytest
from fake_engine import FakeEngine
from fastapi.testclient import TestClient
from openai.types.responses import response_create_params as params
from pydantic import BaseModel
from transformers import AutoTokenizer

from stencil.api.app import ServerConfig, create_app
from stencil.api.responses_api.store import ResponseStore
from stencil.api.responses_api.surface import RESPONSES_FIELDS
from stencil.engine.models.default_model import default_model_path

DOCS = Path(__file__).parents[2] / "docs" / "server.md"
SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
TOOL = {"type": "function", "name": "f", "parameters": SCHEMA, "strict": True}
TEMPLATE = (
    "{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}"
    "{% if reasoning_effort %}effort={{ reasoning_effort }}\n{% endif %}<assistant>"
)
SAMPLES: dict[str, Any] = {
    "model": "fake-model",
    "input": "hi",
    "instructions": "Be brief.",
    "max_output_tokens": 8,
    "temperature": 0.2,
    "top_p": 0.9,
    "top_logprobs": 2,
    "text": {"format": {"type": "json_schema", "name": "A", "schema": SCHEMA, "strict": True}},
    "tools": [TOOL],
    "tool_choice": "required",
    "parallel_tool_calls": False,
    "max_tool_calls": 1,
    "previous_response_id": None,  # filled with a stored response's id
    "store": False,
    "stream": True,
    "include": ["message.output_text.logprobs", "reasoning.encrypted_content"],
    "truncation": "disabled",
    "reasoning": {"effort": "low"},
    "metadata": {"team": "a"},
    "user": "user-1",
    "safety_identifier": "hash-1",
    "service_tier": "auto",
    "prompt_cache_key": "k",
    "prompt_cache_retention": "24h",
    "prompt_cache_options": {"mode": "implicit"},
    "stream_options": {"include_obfuscation": False},
    "background": True,
    "conversation": "conv_1",
    "prompt": {"id": "pmpt_1"},
    "context_management": [{"type": "compaction", "compact_threshold": 1000}],
    "moderation": {"model": "omni-moderation-latest"},
}
NEEDS: dict[str, dict[str, Any]] = {
    "stream_options": {"stream": True},
    "tool_choice": {"tools": [TOOL]},
}
SDK_FIELDS = {
    name
    for td in (params.ResponseCreateParamsNonStreaming, params.ResponseCreateParamsStreaming)
    for name in td.__annotations__
}


def test_every_sdk_field_is_classified():
    assert SDK_FIELDS == RESPONSES_FIELDS.keys(), f"openai {openai.__version__}"
    assert SAMPLES.keys() == SDK_FIELDS


def test_docs_table_lists_every_field():
    section = DOCS.read_text().split("## The Responses API", 1)[1].split("\n## ", 1)[0]
    for name, spec in RESPONSES_FIELDS.items():
        row = next((ln for ln in section.splitlines() if ln.startswith(f"| `{name}` |")), None)
        assert row is not None and spec.treatment in row, name


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(str(default_model_path()))


def _reply(prompt, p) -> str:
    if p.constraint is None:
        return "Hello there"
    return (
        '[{"name": "f", "arguments": {"a": 1}}]' if '"const"' in p.constraint.source else '{"a": 1}'
    )


def make_app(tokenizer, template: str | None = None, api_key: str | None = "sk-a"):
    tok = copy.copy(tokenizer)
    if template is not None:
        tok.chat_template = template
    prompts: list[str] = []

    def reply(prompt, p) -> str:
        prompts.append(tok.decode(prompt))
        return _reply(prompt, p)

    return create_app(FakeEngine(tok, reply), ServerConfig(api_key=api_key)), prompts


def sdk_for(http: TestClient, key: str = "sk-a") -> openai.OpenAI:
    return openai.OpenAI(base_url="http://testserver/v1", api_key=key, http_client=http)


@pytest.fixture(scope="module")
def smol(tokenizer):
    app, prompts = make_app(tokenizer)
    with TestClient(app) as http:
        yield sdk_for(http), prompts


def create(sdk, field: str, value: Any):
    body = {"model": "fake-model", "input": "hi", field: value, **NEEDS.get(field, {})}
    return sdk.responses.create(**body)


def expect_400(call, param: str) -> str:
    with pytest.raises(openai.BadRequestError) as e:
        call()
    assert e.value.body["param"] == param, e.value.body
    return e.value.body["message"]


ACCEPTED = sorted(f for f, s in RESPONSES_FIELDS.items() if s.treatment in ("honoured", "advisory"))


@pytest.mark.parametrize("field", ACCEPTED)
def test_field_accepted(smol, field):
    sdk, _ = smol
    value = SAMPLES[field]
    if field == "previous_response_id":
        value = sdk.responses.create(model="fake-model", input="turn one").id
    r = create(sdk, field, value)
    if field in ("stream", "stream_options"):
        events = list(r)
        assert events[-1].type == "response.completed", events[-1]
        r = events[-1].response
    assert r.status == "completed" and r.output and r.usage.output_tokens >= 1
    if field == "tools":
        assert r.output[-1].type in ("message", "function_call")
    if field in ("top_logprobs", "include"):
        assert r.output[0].content[0].logprobs, r.output[0]


@pytest.mark.parametrize(
    "field", sorted(f for f, s in RESPONSES_FIELDS.items() if s.treatment == "refused")
)
def test_field_refused_with_reason(smol, field):
    sdk, _ = smol
    message = expect_400(lambda: create(sdk, field, SAMPLES[field]), field)
    assert RESPONSES_FIELDS[field].note in message


def test_reasoning_effort_reaches_the_template(tokenizer, smol):
    app, prompts = make_app(tokenizer, TEMPLATE)
    with TestClient(app) as http:
        create(sdk_for(http), "reasoning", {"effort": "low"})
    assert "effort=low" in prompts[-1]
    sdk, _ = smol  # SmolLM2's template has no place for it: a 400, not silence
    expect_400(lambda: create(sdk, "reasoning", {"effort": "low"}), "reasoning.effort")


@pytest.mark.parametrize(
    ("tool", "param"),
    [
        ({"type": "web_search_preview"}, "tools.0.type"),
        ({"type": "file_search", "vector_store_ids": ["vs_1"]}, "tools.0.type"),
        (
            {
                "type": "computer_use_preview",
                "display_width": 8,
                "display_height": 8,
                "environment": "linux",
            },
            "tools.0.type",
        ),  # fmt: skip
        ({"type": "code_interpreter", "container": {"type": "auto"}}, "tools.0.type"),
        ({"type": "mcp", "server_label": "x", "server_url": "http://127.0.0.1:1"}, "tools.0.type"),
        ({"type": "image_generation"}, "tools.0.type"),
        ({"type": "custom", "name": "c"}, "tools.0.type"),
    ],
)
def test_built_in_tools_are_refused(smol, tool, param):
    sdk, _ = smol
    message = expect_400(lambda: create(sdk, "tools", [tool]), param)
    assert "built-in tools" in message


def test_stored_responses_never_cross_api_keys(tokenizer):
    app, _ = make_app(tokenizer, api_key=None)  # no server key: every bearer token is a scope
    with TestClient(app) as http:
        alice, bob = sdk_for(http, "key-alice"), sdk_for(http, "key-bob")
        r = alice.responses.create(model="fake-model", input="secret")
        assert alice.responses.retrieve(r.id).id == r.id
        with pytest.raises(openai.NotFoundError):
            bob.responses.retrieve(r.id)
        with pytest.raises(openai.NotFoundError):
            bob.responses.create(model="fake-model", input="x", previous_response_id=r.id)
        with pytest.raises(openai.NotFoundError):
            bob.responses.delete(r.id)
        assert alice.responses.retrieve(r.id).id == r.id  # bob's delete did not touch it


def test_function_call_output_after_previous_response_id(tokenizer):
    """OpenAI's tool loop: turn 1 returns a function_call; turn 2 sends only its output, with
    previous_response_id; the call and the output both reach the prompt."""
    app, prompts = make_app(tokenizer)
    with TestClient(app) as http:
        sdk = sdk_for(http)
        r1 = sdk.responses.create(model="fake-model", input="call f", tools=[TOOL],
                                  tool_choice="required")  # fmt: skip
        call = r1.output[-1]
        assert call.type == "function_call" and call.name == "f"
        answer = {"type": "function_call_output", "call_id": call.call_id, "output": "RESULT-42"}
        r2 = sdk.responses.create(model="fake-model", input=[answer], previous_response_id=r1.id)
        assert r2.status == "completed" and r2.previous_response_id == r1.id
        assert "RESULT-42" in prompts[-1] and '"a": 1' in prompts[-1] and "call f" in prompts[-1]
        stray = {**answer, "call_id": "call_unknown"}
        message = expect_400(
            lambda: sdk.responses.create(model="fake-model", input=[stray]), "input"
        )
        assert "call_unknown" in message


def _response(rid: str, text: str = "") -> dict[str, Any]:
    return {"id": rid, "output": text}


@pytest.mark.parametrize(
    ("max_entries", "max_bytes", "puts", "kept", "evicted"),
    [
        (2, 10_000, ["a", "b", "c"], ["b", "c"], 1),  # count bound: the oldest goes
        (10, 200, ["a", "b", "c"], ["b", "c"], 1),  # byte bound (each entry ~70 bytes)
        (10, 60, ["a"], [], 0),  # one entry over the whole budget is not kept
        (0, 10_000, ["a"], [], 0),
    ],
)
def test_store_bounds(max_entries, max_bytes, puts, kept, evicted):
    store = ResponseStore(max_entries, max_bytes)
    for rid in puts:
        store.put("s", _response(rid, "x" * 20), [{"role": "user", "content": "y"}])
    assert [rid for rid in puts if store.get("s", rid)] == kept
    assert store.bytes <= max_bytes and len(store) == len(kept)
    stats = store.metrics()
    assert stats["stored_responses"] == len(kept) and stats["stored_response_bytes"] == store.bytes
    assert stats["stored_response_evictions_total"] == evicted


def test_store_lru_order_and_scope():
    store = ResponseStore(2, 10_000)
    store.put("s", _response("a"), [])
    store.put("s", _response("b"), [])
    store.get("s", "a")  # a is now the most recently used
    store.put("s", _response("c"), [])
    assert store.get("s", "b") is None and store.get("s", "a") and store.get("s", "c")
    assert store.get("other", "a") is None and not store.delete("other", "a")
    assert store.delete("s", "a") and store.get("s", "a") is None


# ---- a reasoning model's output -----------------------------------------------------------------


class A(BaseModel):
    a: int


@pytest.fixture(scope="module")
def thinking(tokenizer):
    tok = copy.copy(tokenizer)

    def reply(prompt, p) -> str:
        return "<think>\nfirst a, then b</think>\n\n" + ('{"a": 1}' if p.constraint else "Done.")

    engine = FakeEngine(tok, reply)
    engine.reasoning_end = "</think>"
    with TestClient(create_app(engine, ServerConfig(api_key="sk-a"))) as http:
        yield sdk_for(http)


@pytest.mark.parametrize("streamed", [False, True])
def test_reasoning_becomes_a_reasoning_item(thinking, streamed):
    if streamed:
        with thinking.responses.stream(model="fake-model", input="hi", text_format=A) as s:
            events = list(s)
            r = s.get_final_response()
        kinds = [e.type for e in events]
        deltas = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
        assert deltas == "\nfirst a, then b" and "response.reasoning_text.done" in kinds
        text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        assert text == '{"a": 1}'
        added = [e.output_index for e in events if e.type == "response.output_item.added"]
        assert added == [0, 1] and [e.sequence_number for e in events] == list(range(len(events)))
    else:
        r = thinking.responses.parse(model="fake-model", input="hi", text_format=A)
    assert [item.type for item in r.output] == ["reasoning", "message"]
    assert r.output[0].content[0].text == "\nfirst a, then b"
    assert r.output_text == '{"a": 1}' and r.output_parsed == A(a=1)
