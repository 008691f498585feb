"""The Responses API (``/v1/responses``) through the real ``openai`` SDK against a live server with
the embedded SmolLM2: create, parse (a Pydantic model with a ``set[str]``), stream with
``text_format``, a required function tool answered with ``function_call_output``, two turns over
``previous_response_id``, and GET / DELETE of stored responses. Assertions are about structure,
validity and protocol (the 135M model's facts are not the point)."""

from __future__ import annotations

import json

import httpx
import jsonschema
import openai
import pytest
from pydantic import BaseModel, Field

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Get the current weather for a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 20}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}


class Trip(BaseModel):
    """A short trip."""

    city: str = Field(max_length=20)
    days: int = Field(ge=1, le=30)
    tags: set[str] = Field(max_length=3)


def test_create(client, model):
    r = client.responses.create(
        model=model, input="Say hello.", instructions="Be brief.", max_output_tokens=12,
        temperature=0, metadata={"team": "a"},
    )  # fmt: skip
    assert r.object == "response" and r.id.startswith("resp_") and r.model == model
    assert r.status in ("completed", "incomplete") and r.metadata == {"team": "a"}
    assert [item.type for item in r.output] == ["message"]
    assert r.output[0].content[0].type == "output_text" and r.output_text
    assert 1 <= r.usage.output_tokens <= 12 and r.usage.input_tokens > 5
    if r.status == "incomplete":
        assert r.incomplete_details.reason == "max_output_tokens"


def test_parse_pydantic_with_a_set(client, model):
    r = client.responses.parse(
        model=model, input="Plan a trip to Paris with tags.", text_format=Trip,
        max_output_tokens=80, temperature=0,
    )  # fmt: skip
    assert r.status == "completed"
    assert isinstance(r.output_parsed, Trip) and isinstance(r.output_parsed.tags, set)
    doc = json.loads(r.output_text)
    jsonschema.validate(doc, Trip.model_json_schema())
    assert len(doc["tags"]) == len(set(doc["tags"]))


def test_stream_text_format(client, model):
    with client.responses.stream(
        model=model, input="Plan a trip to Rome.", text_format=Trip, max_output_tokens=80,
        temperature=0,
    ) as stream:  # fmt: skip
        events = list(stream)
        final = stream.get_final_response()
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    for kind in ("output_item.added", "content_part.added", "output_text.done",
                 "content_part.done", "output_item.done"):  # fmt: skip
        assert kinds.count(f"response.{kind}") == 1, kind
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    jsonschema.validate(json.loads(text), Trip.model_json_schema())
    assert final.output_text == text and isinstance(final.output_parsed, Trip)


def test_required_tool_and_its_output(client, model):
    question = {"role": "user", "content": "What is the weather in Paris?"}
    r = client.responses.create(
        model=model, input=[question], tools=[WEATHER], tool_choice="required",
        max_output_tokens=60, temperature=0,
    )  # fmt: skip
    calls = [item for item in r.output if item.type == "function_call"]
    assert calls and r.status == "completed"
    for call in calls:
        assert call.name == "get_weather" and call.call_id.startswith("call_")
        jsonschema.validate(json.loads(call.arguments), WEATHER["parameters"])
    answers = [
        {"type": "function_call_output", "call_id": c.call_id, "output": '{"sky": "sunny"}'}
        for c in calls
    ]
    r2 = client.responses.create(
        model=model, input=[question, *r.output, *answers], tools=[WEATHER],
        max_output_tokens=16, temperature=0,
    )  # fmt: skip
    assert r2.status in ("completed", "incomplete") and r2.output
    assert r2.usage.input_tokens > r.usage.input_tokens  # the call and its output are in the prompt


def test_stream_tool_call_events(client, model):
    with client.responses.stream(
        model=model, input="Weather in Oslo?", tools=[WEATHER],
        tool_choice={"type": "function", "name": "get_weather"}, max_output_tokens=60,
    ) as stream:  # fmt: skip
        events = list(stream)
        final = stream.get_final_response()
    done = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert len(done) == 1 and done[0].name == "get_weather"
    deltas = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    assert deltas == done[0].arguments == final.output[-1].arguments
    jsonschema.validate(json.loads(deltas), WEATHER["parameters"])


def test_previous_response_id_get_delete(client, model, live_server):
    r1 = client.responses.create(model=model, input="My name is Ada.", max_output_tokens=8)
    r2 = client.responses.create(
        model=model, input="What is my name?", previous_response_id=r1.id, max_output_tokens=8
    )
    assert r2.previous_response_id == r1.id
    alone = client.responses.create(model=model, input="What is my name?", max_output_tokens=1)
    # turn 1 (its input, at least 3 tokens, and its whole output) is in turn 2's prompt
    assert r2.usage.input_tokens >= alone.usage.input_tokens + r1.usage.output_tokens + 3
    stored = live_server.metrics()
    assert stored["stored_responses"] >= 2 and stored["stored_response_bytes"] > 1000
    got = client.responses.retrieve(r1.id)
    assert got.id == r1.id and got.output_text == r1.output_text
    deleted = client.responses.delete(r1.id)
    assert deleted is None or getattr(deleted, "deleted", True)
    with pytest.raises(openai.NotFoundError, match="evicted"):
        client.responses.retrieve(r1.id)
    with pytest.raises(openai.NotFoundError) as e:
        client.responses.create(model=model, input="Again?", previous_response_id=r1.id)
    assert e.value.body["param"] == "previous_response_id"
    unstored = client.responses.create(model=model, input="Hi", store=False, max_output_tokens=2)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(unstored.id)


def test_disconnect_mid_stream_aborts(live_server, model):
    before = live_server.wait_idle()["request_client_disconnects_total"]
    long = {  # at least 40 strings of 20+ characters: no early end of the output
        "type": "object",
        "properties": {"lines": {"type": "array", "minItems": 40,
                                 "items": {"type": "string", "minLength": 20}}},
        "required": ["lines"],
    }  # fmt: skip
    body = {"model": model, "input": "Write a long story about a dragon.", "stream": True,
            "max_output_tokens": 600, "temperature": 0,
            "text": {"format": {"type": "json_schema", "name": "story", "schema": long}}}  # fmt: skip
    headers = {"Authorization": f"Bearer {live_server.api_key}"}
    with httpx.Client(timeout=30) as http:
        with http.stream("POST", f"{live_server.v1}/responses", json=body, headers=headers) as r:
            for line in r.iter_lines():
                if line == "event: response.output_text.delta":
                    # read while the stream is open: leaving iter_lines closes it (the disconnect)
                    assert live_server.metrics()["kv_cache_usage_perc"] > 0
                    break
    assert live_server.wait_idle()["request_client_disconnects_total"] >= before + 1
