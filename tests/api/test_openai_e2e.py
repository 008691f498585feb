"""The real ``openai`` client against a live server with the embedded SmolLM2 model."""

from __future__ import annotations

import json
import re
from enum import StrEnum

import httpx
import jsonschema
import lark
import openai
import pytest
from pydantic import BaseModel, Field

CHAT = [{"role": "user", "content": "Say hello in five words."}]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 20},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Get the local time in a timezone",
        "parameters": {
            "type": "object",
            "properties": {"timezone": {"type": "string", "maxLength": 20}},
            "required": ["timezone"],
        },
    },
}


class Color(StrEnum):
    red = "red"
    green = "green"


class Person(BaseModel):
    """Information about a person."""

    name: str = Field(description="Full name", max_length=30)
    age: int = Field(ge=0, le=150)
    favourite: Color | None = None


def test_chat_plain(client, model):
    r = client.chat.completions.create(model=model, messages=CHAT, max_tokens=8, temperature=0)
    choice = r.choices[0]
    assert choice.message.content and choice.message.role == "assistant"
    assert choice.message.refusal is None and choice.finish_reason in ("stop", "length")
    assert r.usage.completion_tokens <= 8 and r.usage.prompt_tokens > 10
    assert r.system_fingerprint and r.model == model


def test_chat_stream_matches_non_stream(client, model):
    ref = client.chat.completions.create(model=model, messages=CHAT, max_tokens=8, temperature=0)
    chunks = list(
        client.chat.completions.create(
            model=model,
            messages=CHAT,
            max_tokens=8,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == ref.choices[0].message.content
    finish = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    assert finish == [ref.choices[0].finish_reason]
    assert (
        chunks[-1].choices == []
        and chunks[-1].usage.completion_tokens == ref.usage.completion_tokens
    )


def test_chat_n2_and_logprobs(client, model):
    r = client.chat.completions.create(
        model=model,
        messages=CHAT,
        max_tokens=5,
        n=2,
        temperature=1.0,
        seed=1,
        logprobs=True,
        top_logprobs=2,
    )
    assert [c.index for c in r.choices] == [0, 1]
    for c in r.choices:
        assert c.logprobs is not None and len(c.logprobs.content) >= 1
        for entry in c.logprobs.content:
            assert entry.logprob <= 0 and len(entry.top_logprobs) == 2
        # the bytes make up the answer, a character split across tokens too (its tokens'
        # texts are U+FFFD each, as a tokenizer decodes them alone)
        assert b"".join(bytes(e.bytes) for e in c.logprobs.content) == c.message.content.encode()


def test_parse_pydantic_response_format(client, model):
    r = client.chat.completions.parse(
        model=model,
        response_format=Person,
        max_tokens=60,
        temperature=0,
        messages=[{"role": "user", "content": "Ada Lovelace was 36. Extract the person."}],
    )
    msg = r.choices[0].message
    assert r.choices[0].finish_reason == "stop"
    assert isinstance(msg.parsed, Person)
    jsonschema.validate(json.loads(msg.content), Person.model_json_schema())


def test_chat_stream_helper_with_response_format(client, model):
    with client.chat.completions.stream(
        model=model,
        response_format=Person,
        max_tokens=60,
        temperature=0,
        messages=[{"role": "user", "content": "Grace Hopper, 85."}],
    ) as stream:
        for _ in stream:
            pass
        final = stream.get_final_completion()
    assert isinstance(final.choices[0].message.parsed, Person)


def _complete(client, model, **extra):
    r = client.completions.create(
        model=model, prompt="My phone number is", max_tokens=20, temperature=0, extra_body=extra
    )
    assert r.choices[0].finish_reason == "stop", r.choices[0]
    return r.choices[0].text


def test_completions_guided_regex(client, model):
    text = _complete(client, model, guided_regex=r"\d{3}-\d{4}")
    assert re.fullmatch(r"\d{3}-\d{4}", text), text


def test_completions_guided_choice(client, model):
    assert _complete(client, model, guided_choice=["yes", "no", "maybe"]) in ("yes", "no", "maybe")


def test_completions_guided_grammar(client, model):
    grammar = 'start: NUMBER (" + " NUMBER)?\nNUMBER: /[0-9]{1,3}/'
    text = _complete(client, model, guided_grammar=grammar)
    lark.Lark(grammar).parse(text)


def test_completions_structured_outputs_json(client, model):
    schema = {
        "type": "object",
        "properties": {"digits": {"type": "string", "pattern": "^[0-9]{4}$"}},
        "required": ["digits"],
    }
    text = _complete(client, model, structured_outputs={"json": schema})
    jsonschema.validate(json.loads(text), schema)
    text = _complete(client, model, structured_outputs={"regex": "[a-z]{2,5}"})
    assert re.fullmatch("[a-z]{2,5}", text)


def test_chat_guided_json_extension(client, model):
    schema = Person.model_json_schema()
    r = client.chat.completions.create(
        model=model,
        max_tokens=60,
        temperature=0,
        messages=[{"role": "user", "content": "Alan Turing was 41."}],
        extra_body={"guided_json": schema, "guided_decoding_backend": "xgrammar"},
    )
    assert r.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(r.choices[0].message.content), schema)


def _check_calls(choice, tools, single):
    assert choice.finish_reason == "tool_calls", choice
    calls = choice.message.tool_calls
    assert calls and (len(calls) == 1 or not single)
    by_name = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    for call in calls:
        assert call.id and call.type == "function"
        jsonschema.validate(json.loads(call.function.arguments), by_name[call.function.name])


def test_tools_named(client, model):
    r = client.chat.completions.create(
        model=model,
        max_tokens=50,
        temperature=0,
        tools=[WEATHER, TIME],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
    )
    _check_calls(r.choices[0], [WEATHER], single=True)
    assert r.choices[0].message.tool_calls[0].function.name == "get_weather"


def test_tools_required_single_call(client, model):
    r = client.chat.completions.create(
        model=model,
        max_tokens=50,
        temperature=0,
        tools=[WEATHER, TIME],
        tool_choice="required",
        parallel_tool_calls=False,
        messages=[{"role": "user", "content": "What time is it in Tokyo?"}],
    )
    _check_calls(r.choices[0], [WEATHER, TIME], single=True)


def test_tools_required_streaming(client, model):
    chunks = list(
        client.chat.completions.create(
            model=model,
            max_tokens=50,
            temperature=0,
            tools=[WEATHER],
            tool_choice="required",
            stream=True,
            messages=[{"role": "user", "content": "Weather in Rome?"}],
        )
    )
    deltas = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    assert deltas and deltas[0].function.name == "get_weather"
    jsonschema.validate(json.loads(deltas[0].function.arguments), WEATHER["function"]["parameters"])
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_tools_auto_answers_text_or_a_valid_call(client, model):
    r = client.chat.completions.create(
        model=model,
        max_tokens=40,
        temperature=0,
        tools=[WEATHER],
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
    )
    choice = r.choices[0]
    if choice.message.tool_calls:
        _check_calls(choice, [WEATHER], single=False)
    else:
        assert choice.message.content and "<tool_call>" not in choice.message.content


def test_models_tokenize_version(live_server, client, model):
    assert [m.id for m in client.models.list().data] == [model]
    h = {"Authorization": f"Bearer {live_server.api_key}"}
    r = httpx.post(f"{live_server.base_url}/tokenize", json={"prompt": "Hello"}, headers=h)
    assert r.json()["count"] >= 1
    assert httpx.get(f"{live_server.base_url}/health").status_code == 200


def test_bad_key_is_401(live_server, model):
    bad = openai.OpenAI(base_url=live_server.v1, api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.chat.completions.create(model=model, messages=CHAT, max_tokens=2)
    assert httpx.get(f"{live_server.base_url}/metrics").status_code == 401


BAD = [
    ({"guided_regex": "a", "guided_choice": ["b"]}, "guided_choice"),
    ({"guided_regex": "(unclosed"}, "guided_regex"),
    (
        {"guided_json": {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}},
        "guided_json",
    ),
    ({"guided_grammar": "start: nothing_defined"}, "guided_grammar"),
    ({"guided_decoding_backend": "nope"}, "guided_decoding_backend"),
    ({"unknown_field": 1}, "unknown_field"),
    ({"top_k": -3}, "top_k"),
    ({"logit_bias": {"99999999": 1}}, "logit_bias"),
    ({"max_tokens": 10**6}, "max_tokens"),
    (
        {
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": "x",
                    "schema": {"type": "object", "properties": {"a": {"type": "strnig"}}},
                },
            }
        },
        "response_format.json_schema.schema",
    ),
]


@pytest.mark.parametrize("extra, param", BAD, ids=[p for _, p in BAD])
def test_bad_requests_are_400_naming_the_field(client, model, extra, param):
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=model, messages=CHAT, max_tokens=4, extra_body=extra)
    err = info.value.body
    assert err["param"] == param, err
    assert info.value.status_code == 400


# compiles, but the decode-time check refuses every digit the grammar allows: the constraint
# fails after the first token, whatever the model writes
DOOMED = {"type": "integer", "minimum": 0, "maximum": 9, "not": {"type": "integer"}}


def test_a_constraint_failing_mid_generation_is_a_400_and_spares_the_others(live_server, model):
    """A constraint that can go no further mid-generation is the request's fault: a 400 (code
    ``constraint_failed``; streamed: an error event of that type), never a 500, while a request
    running beside it gets what it gets alone."""
    from concurrent.futures import ThreadPoolExecutor

    live_server.wait_idle()
    plain = {"model": model, "messages": CHAT, "max_tokens": 48, "temperature": 0}
    plain["ignore_eos"] = True
    doomed = {"model": model, "messages": CHAT, "max_tokens": 16, "temperature": 0}
    doomed["response_format"] = {"type": "json_schema", "json_schema": {"name": "digit"}}
    doomed["response_format"]["json_schema"]["schema"] = DOOMED
    h = {"Authorization": f"Bearer {live_server.api_key}"}
    url = f"{live_server.v1}/chat/completions"

    def post(body):
        return httpx.post(url, json=body, headers=h, timeout=60)

    alone = post(plain).json()["choices"][0]["message"]["content"]
    with ThreadPoolExecutor(3) as pool:
        other = pool.submit(post, plain)
        failed = [pool.submit(post, doomed) for _ in range(2)]
        streamed = pool.submit(post, doomed | {"stream": True})
    for r in (f.result() for f in failed):
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert err["code"] == "constraint_failed" and err["type"] == "invalid_request_error"
        assert "no continuation satisfies 'not'" in err["message"]
    events = [json.loads(x[6:]) for x in streamed.result().text.splitlines() if x[6:7] == "{"]
    assert [e["error"]["code"] for e in events if "error" in e] == ["constraint_failed"]
    assert other.result().json()["choices"][0]["message"]["content"] == alone
    live_server.wait_idle()


def test_unknown_model_is_404(client):
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="gpt-4o", messages=CHAT, max_tokens=2)


def test_disconnect_mid_stream_frees_blocks(live_server, model):
    live_server.wait_idle()
    body = {
        "model": model,
        "messages": CHAT,
        "max_tokens": 400,
        "stream": True,
        "ignore_eos": True,
        "temperature": 0,
    }
    h = {"Authorization": f"Bearer {live_server.api_key}"}
    with httpx.Client(timeout=30) as http:
        with http.stream("POST", f"{live_server.v1}/chat/completions", json=body, headers=h) as r:
            lines = r.iter_lines()
            got = [next(lines) for _ in range(6)]
            assert any(x.startswith("data: ") for x in got)
            assert live_server.metrics()["kv_cache_usage_perc"] > 0
    m = live_server.wait_idle()
    assert m["request_client_disconnects_total"] >= 1


def test_disconnect_while_waiting_frees_blocks(live_server, model):
    live_server.wait_idle()
    body = {"model": model, "messages": CHAT, "max_tokens": 400, "ignore_eos": True}
    h = {"Authorization": f"Bearer {live_server.api_key}"}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{live_server.v1}/chat/completions", json=body, headers=h, timeout=1.5)
    live_server.wait_idle()
