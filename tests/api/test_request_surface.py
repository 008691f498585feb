"""Every field of OpenAI's chat and completion requests, as the ``openai`` package sends it.

The field lists come from the installed SDK's request TypedDicts, so a field a new SDK version adds
fails here until ``stencil/api/openai/surface.py`` and docs/server.md classify it. Each field is
sent through the real client (its own serialization) to the app over a fake engine, and must be
honoured (accepted; effects are tested elsewhere), reach the chat template (``template``), be
accepted without effect (``advisory``) or be refused with a 400 that names it and says why.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import openai
import pytest
from fake_engine import FakeEngine
from fastapi.testclient import TestClient
from openai.types import completion_create_params as completion_params
from openai.types.chat import completion_create_params as chat_params
from transformers import AutoTokenizer

from stencil.api.app import ServerConfig, create_app
from stencil.api.openai.surface import CHAT_FIELDS, COMPLETION_FIELDS, MESSAGE_FIELDS
from stencil.engine.models.default_model import default_model_path

KEY = "sk-test"
DOCS = Path(__file__).parents[2] / "docs" / "server.md"
USER = [{"role": "user", "content": "hi"}]
SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
TOOL = {"type": "function", "function": {"name": "f", "parameters": SCHEMA}}

# One representative value per field, in the shape the SDK's types describe.
CHAT_SAMPLES: dict[str, Any] = {
    "messages": USER,
    "model": "fake-model",
    "frequency_penalty": 0.5,
    "presence_penalty": 0.5,
    "logit_bias": {"5": 1.0},
    "logprobs": True,
    "top_logprobs": 2,
    "max_completion_tokens": 8,
    "max_tokens": 8,
    "n": 2,
    "parallel_tool_calls": False,
    "response_format": {"type": "json_object"},
    "seed": 3,
    "stop": ["\n\n"],
    "stream": False,
    "stream_options": {"include_usage": True},
    "temperature": 0.2,
    "tool_choice": "none",
    "tools": [TOOL],
    "top_p": 0.9,
    "modalities": ["text"],
    "reasoning_effort": "low",
    "verbosity": "low",
    "user": "user-1",
    "metadata": {"team": "a"},
    "store": True,
    "service_tier": "auto",
    "safety_identifier": "hash-1",
    "prompt_cache_key": "k",
    "prompt_cache_retention": "24h",
    "prompt_cache_options": {"ttl": "1h"},
    "prediction": {"type": "content", "content": "Hello"},
    "audio": {"voice": "alloy", "format": "wav"},
    "functions": [{"name": "f", "parameters": SCHEMA}],
    "function_call": "auto",
    "web_search_options": {},
    "moderation": {"input": {"mode": "block"}},
}
COMPLETION_SAMPLES: dict[str, Any] = {
    **{k: CHAT_SAMPLES[k] for k in ("model", "frequency_penalty", "presence_penalty", "seed")},
    **{k: CHAT_SAMPLES[k] for k in ("logit_bias", "max_tokens", "n", "stop", "temperature")},
    **{k: CHAT_SAMPLES[k] for k in ("top_p", "user", "stream", "stream_options")},
    "prompt": "Hello",
    "logprobs": 2,
    "echo": True,
    "best_of": 2,
    "suffix": " world",
}


# Fields that are only valid beside another one (as in OpenAI's API).
NEEDS: dict[str, dict[str, Any]] = {
    "top_logprobs": {"logprobs": True},
    "stream_options": {"stream": True},
    "best_of": {"n": 2},
}


def sdk_fields(*typeddicts: Any) -> set[str]:
    return {name for td in typeddicts for name in td.__annotations__}


CHAT_SDK = sdk_fields(
    chat_params.CompletionCreateParamsNonStreaming, chat_params.CompletionCreateParamsStreaming
)
COMPLETION_SDK = sdk_fields(
    completion_params.CompletionCreateParamsNonStreaming,
    completion_params.CompletionCreateParamsStreaming,
)
MESSAGE_SDK = sdk_fields(*chat_params.ChatCompletionMessageParam.__args__)


@pytest.mark.parametrize(
    ("sdk", "table", "samples"),
    [
        (CHAT_SDK, CHAT_FIELDS, CHAT_SAMPLES),
        (COMPLETION_SDK, COMPLETION_FIELDS, COMPLETION_SAMPLES),
        (MESSAGE_SDK, MESSAGE_FIELDS, None),
    ],
    ids=["chat", "completions", "messages"],
)
def test_every_sdk_field_is_classified(sdk, table, samples):
    assert sdk - table.keys() == set(), f"openai {openai.__version__} fields not classified"
    assert table.keys() - sdk <= {"tool_call_id", "tool_calls"} | MESSAGE_FIELDS.keys()
    if samples is not None:
        assert samples.keys() == sdk


def test_docs_table_lists_every_field():
    text = DOCS.read_text()
    for name, spec in {**CHAT_FIELDS, **COMPLETION_FIELDS}.items():
        assert f"| `{name}` |" in text, name
        row = next(line for line in text.splitlines() if line.startswith(f"| `{name}` |"))
        assert spec.treatment in row or name in COMPLETION_FIELDS, row


# ---- the app over a fake engine, through the real SDK -----------------------------------------

TEMPLATE = (
    "{% for m in messages %}<{{ m.role }}{% if m.name %} name={{ m.name }}{% endif %}>"
    "{{ m.content }}\n{% endfor %}"
    "{% if reasoning_effort %}effort={{ reasoning_effort }}\n{% endif %}"
    "{% if verbosity %}verbosity={{ verbosity }}\n{% endif %}<assistant>"
)


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(str(default_model_path()))


def make_client(tokenizer, template: str | None = None):
    tok = copy.copy(tokenizer)
    if template is not None:
        tok.chat_template = template
    prompts: list[str] = []

    def reply(prompt, params) -> str:
        prompts.append(tok.decode(prompt))
        if params.constraint is None:
            return "Hello there"
        called = re.search(r'"const": ?"(\w+)"', params.constraint.source)
        return (
            f'[{{"name": "{called.group(1)}", "arguments": {{"a": 1}}}}]' if called else '{"a": 1}'
        )

    app = create_app(FakeEngine(tok, reply), ServerConfig(api_key=KEY))
    http = TestClient(app)
    sdk = openai.OpenAI(base_url="http://testserver/v1", api_key=KEY, http_client=http)
    return sdk, prompts, http


@pytest.fixture(scope="module")
def smol(tokenizer):
    sdk, prompts, http = make_client(tokenizer)
    with http:
        yield sdk, prompts


@pytest.fixture(scope="module")
def templated(tokenizer):
    sdk, prompts, http = make_client(tokenizer, TEMPLATE)
    with http:
        yield sdk, prompts


def chat_call(sdk, field: str, value: Any):
    body = {"model": "fake-model", "messages": USER, field: value, **NEEDS.get(field, {})}
    return sdk.chat.completions.create(**body)


def expect_400(call, param: str, *words: str) -> str:
    with pytest.raises(openai.BadRequestError) as e:
        call()
    err = e.value.body
    assert err["param"] == param, err
    for word in words:
        assert word in err["message"], err
    return err["message"]


@pytest.mark.parametrize(
    "field", sorted(f for f, s in CHAT_FIELDS.items() if s.treatment in ("honoured", "advisory"))
)
def test_chat_field_accepted(smol, field):
    sdk, _ = smol
    resp = chat_call(sdk, field, CHAT_SAMPLES[field])
    if field == "stream_options":
        chunks = list(resp)
        assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens >= 1
        assert chunks[-2].choices[0].finish_reason == "stop"
        return
    assert resp.choices and resp.choices[0].finish_reason in ("stop", "tool_calls")
    assert resp.usage is not None and resp.usage.completion_tokens >= 1


@pytest.mark.parametrize(
    "field", sorted(f for f, s in CHAT_FIELDS.items() if s.treatment == "refused")
)
def test_chat_field_refused_with_reason(smol, field):
    sdk, _ = smol
    message = expect_400(lambda: chat_call(sdk, field, CHAT_SAMPLES[field]), field)
    assert CHAT_FIELDS[field].note in message


@pytest.mark.parametrize("field", ["reasoning_effort", "verbosity"])
def test_template_field_reaches_the_template(smol, templated, field):
    sdk, prompts = templated
    chat_call(sdk, field, "low")
    assert f"{field.replace('_', ' ').split()[-1]}=low" in prompts[-1]
    smol_sdk, _ = smol  # SmolLM2's template has no place for it: a 400, not silence
    expect_400(lambda: chat_call(smol_sdk, field, "low"), field, "chat template")


def test_modalities_audio_refused(smol):
    sdk, _ = smol
    expect_400(lambda: chat_call(sdk, "modalities", ["text", "audio"]), "modalities", "audio")


@pytest.mark.parametrize("role", ["system", "developer", "user", "assistant", "tool"])
def test_message_name_reaches_the_template(templated, smol, role):
    sdk, prompts = templated
    msg: dict[str, Any] = {"role": role, "name": "alice", "content": "x"}
    if role == "tool":
        msg["tool_call_id"] = "call_1"
    sdk.chat.completions.create(model="fake-model", messages=[msg, *USER])
    expected = "system" if role == "developer" else role
    assert f"<{expected} name=alice>x" in prompts[-1]
    smol_sdk, smol_prompts = smol  # a template without a place for it: accepted, no error
    smol_sdk.chat.completions.create(model="fake-model", messages=[msg, *USER])
    assert "alice" not in smol_prompts[-1]


@pytest.mark.parametrize(
    ("message", "param", "word"),
    [
        ({"role": "function", "name": "f", "content": "1"}, "messages.0.role", "tool"),
        (
            {
                "role": "assistant",
                "content": None,
                "function_call": {"name": "f", "arguments": "{}"},
            },
            "messages.0.function_call",
            "tool_calls",
        ),
        ({"role": "assistant", "content": "x", "audio": {"id": "a1"}}, "messages.0.audio", "audio"),
    ],
)
def test_refused_message_fields(smol, message, param, word):
    sdk, _ = smol
    call = lambda: sdk.chat.completions.create(model="fake-model", messages=[message, *USER])  # noqa: E731
    expect_400(call, param, word)


def test_custom_tools_refused(smol):
    sdk, _ = smol
    custom = {"type": "custom", "custom": {"name": "g"}}
    expect_400(lambda: chat_call(sdk, "tools", [TOOL, custom]), "tools.1.type", "function tools")
    choice = {"type": "custom", "custom": {"name": "g"}}
    call = lambda: sdk.chat.completions.create(  # noqa: E731
        model="fake-model", messages=USER, tools=[TOOL], tool_choice=choice
    )
    expect_400(call, "tool_choice.type", "custom")


def test_allowed_tools_choice(smol):
    sdk, _ = smol
    other = copy.deepcopy(TOOL)
    other["function"]["name"] = "g"
    choice = {
        "type": "allowed_tools",
        "allowed_tools": {
            "mode": "required",
            "tools": [{"type": "function", "function": {"name": "g"}}],
        },
    }
    resp = sdk.chat.completions.create(
        model="fake-model", messages=USER, tools=[TOOL, other], tool_choice=choice
    )
    assert resp.choices[0].finish_reason == "tool_calls"
    choice["allowed_tools"]["tools"][0]["function"]["name"] = "missing"
    call = lambda: sdk.chat.completions.create(  # noqa: E731
        model="fake-model", messages=USER, tools=[TOOL, other], tool_choice=choice
    )
    expect_400(call, "tool_choice.allowed_tools.tools", "missing")


@pytest.mark.parametrize("field", sorted(COMPLETION_FIELDS))
def test_completion_field(smol, field):
    sdk, _ = smol
    body = {"model": "fake-model", "prompt": "Hello", field: COMPLETION_SAMPLES[field]}
    body.update(NEEDS.get(field, {}))
    if COMPLETION_FIELDS[field].treatment == "refused":
        message = expect_400(lambda: sdk.completions.create(**body), field)
        assert COMPLETION_FIELDS[field].note in message
        return
    resp = sdk.completions.create(**body)
    chunks = list(resp) if body.get("stream") else [resp]
    assert chunks and chunks[-1].choices is not None
