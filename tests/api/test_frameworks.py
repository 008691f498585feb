"""Structured-output frameworks, unchanged, against a live server: pydantic-ai, outlines, LiteLLM,
DSPy. Each test asserts the structure and the protocol (types, fields, finish reasons, usage), not
the 135M model's judgement. (openai, langchain-openai and instructor: test_openai_e2e.py and
test_clients_e2e.py.)
"""

from __future__ import annotations

import re
from typing import Literal

import pytest
from pydantic import BaseModel, Field

PERSON_TEXT = "Ada Lovelace was 36 years old."


class Person(BaseModel):
    """Information about a person."""

    name: str = Field(description="Full name", max_length=24)
    age: int


class Note(BaseModel):
    """Any JSON object (json_object mode sends no schema)."""

    text: str | None = None


@pytest.fixture(autouse=True)
def offline_litellm(monkeypatch):
    """LiteLLM (also under DSPy) fetches a model price list at import unless told not to."""
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")


# ---- pydantic-ai -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pai_model(live_server):
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    provider = OpenAIProvider(base_url=live_server.v1, api_key=live_server.api_key)
    return OpenAIChatModel(live_server.model, provider=provider)


def _run(model, output_type, prompt: str = PERSON_TEXT):
    from pydantic_ai import Agent

    agent = Agent(model, output_type=output_type, retries=0)
    return agent.run_sync(prompt, model_settings={"max_tokens": 80, "temperature": 0.0})


def test_pydantic_ai_tool_output(pai_model):
    from pydantic_ai import ToolOutput
    from pydantic_ai.messages import ModelResponse, ToolCallPart

    result = _run(pai_model, ToolOutput(Person))
    assert isinstance(result.output, Person)
    response = next(m for m in result.all_messages() if isinstance(m, ModelResponse))
    assert any(isinstance(p, ToolCallPart) for p in response.parts)
    assert response.finish_reason == "tool_call"
    assert _usage(result).output_tokens > 0


def _usage(result):
    return result.usage() if callable(result.usage) else result.usage  # a property in newer ones


def test_pydantic_ai_native_output(pai_model):
    from pydantic_ai import NativeOutput

    result = _run(pai_model, NativeOutput(Person))
    assert isinstance(result.output, Person)
    assert _usage(result).input_tokens > 0 and _usage(result).output_tokens > 0


def test_pydantic_ai_prompted_output(pai_model):
    """PromptedOutput puts the schema in the instructions and asks for ``json_object``."""
    from pydantic_ai import PromptedOutput

    result = _run(pai_model, PromptedOutput(Note), "Reply with a JSON object: " + PERSON_TEXT)
    assert isinstance(result.output, Note)


# ---- outlines --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def outlines_model(live_server):
    import outlines

    return outlines.from_vllm(live_server.openai(), live_server.model)


def test_outlines_pydantic(outlines_model):
    out = outlines_model(PERSON_TEXT, Person, max_tokens=60, temperature=0)
    assert isinstance(Person.model_validate_json(out), Person)


def test_outlines_regex(outlines_model):
    from outlines.types import Regex

    out = outlines_model("A US phone number:", Regex(r"\d{3}-\d{3}-\d{4}"), max_tokens=20)
    assert re.fullmatch(r"\d{3}-\d{3}-\d{4}", out), out


def test_outlines_literal(outlines_model):
    out = outlines_model("Is the sky blue? yes or no.", Literal["yes", "no"], max_tokens=5)
    assert out in ("yes", "no")


def test_outlines_cfg(outlines_model):
    import lark
    from outlines.types import CFG

    grammar = 'start: expr\nexpr: NUMBER | expr "+" expr\nNUMBER: /[0-9]{1,3}/'
    out = outlines_model("An arithmetic sum:", CFG(grammar), max_tokens=24)
    lark.Lark(grammar).parse(out)


# ---- LiteLLM ---------------------------------------------------------------------------------


def _litellm(live_server, **kwargs):
    import litellm

    return litellm.completion(
        model=f"hosted_vllm/{live_server.model}",
        api_base=live_server.v1,
        api_key=live_server.api_key,
        messages=[{"role": "user", "content": PERSON_TEXT}],
        max_tokens=60,
        temperature=0,
        **kwargs,
    )


def test_litellm_response_format_pydantic(live_server):
    resp = _litellm(live_server, response_format=Person)
    choice = resp.choices[0]
    assert choice.finish_reason == "stop"
    assert isinstance(Person.model_validate_json(choice.message.content), Person)
    assert resp.usage.completion_tokens > 0 and resp.usage.prompt_tokens > 0


def test_litellm_stream_json_object(live_server):
    chunks = list(_litellm(live_server, response_format={"type": "json_object"}, stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert Note.model_validate_json(text) is not None or text.startswith("{")
    reasons = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    assert reasons == ["stop"]


def test_litellm_named_tool(live_server):
    tool = {
        "type": "function",
        "function": {"name": "Person", "parameters": Person.model_json_schema()},
    }
    resp = _litellm(
        live_server, tools=[tool], tool_choice={"type": "function", "function": {"name": "Person"}}
    )
    choice = resp.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    assert call.function.name == "Person"
    assert isinstance(Person.model_validate_json(call.function.arguments), Person)


# ---- DSPy ------------------------------------------------------------------------------------


def _dspy_lm(live_server, provider: str, max_tokens: int):
    import dspy

    return dspy.LM(
        f"{provider}/{live_server.model}",
        api_base=live_server.v1,
        api_key=live_server.api_key,
        temperature=0.0,
        max_tokens=max_tokens,
        cache=False,
    )


def test_dspy_lm_response_format(live_server):
    """DSPy's LM (LiteLLM underneath) with a Pydantic ``response_format``: the server enforces it.
    (DSPy's JSONAdapter sends a schema only for a model it knows supports one: see the
    ``dspy_lm`` fixture below.)"""
    lm = _dspy_lm(live_server, "hosted_vllm", max_tokens=60)
    out = lm(PERSON_TEXT, response_format=Person)
    assert isinstance(Person.model_validate_json(out[0]), Person)
    assert lm.history[-1]["usage"]["completion_tokens"] > 0


@pytest.fixture
def dspy_lm(live_server):
    """A ``dspy.LM`` for the live server, declared as an OpenAI-compatible (vLLM-dialect)
    provider that supports response schemas (DSPy's own capability table does not know a local
    model, and then its JSONAdapter falls back to ``json_object``)."""
    from dspy.lm15 import (
        AccessPolicy,
        ModelSupport,
        OpenAIChatCompat,
        ProviderDefinition,
        register_provider,
        unregister_provider,
    )

    access = AccessPolicy(provider="stencil", base_url=live_server.v1)
    compat = OpenAIChatCompat.preset("vllm")
    supports = ModelSupport(response_schema=True, function_calling=True)
    register_provider(
        ProviderDefinition.chat(access, compat=compat), supports=supports, replace=True
    )
    try:
        yield _dspy_lm(live_server, "stencil", max_tokens=80)
    finally:
        unregister_provider("stencil")


def test_dspy_json_adapter_typed_outputs(dspy_lm):
    """DSPy's JSONAdapter sends the signature's output fields as a JSON schema; the server
    enforces it, and DSPy parses the reply into the declared Python types."""
    import dspy

    class Facts(dspy.Signature):
        """Extract facts about the person in the text."""

        text: str = dspy.InputField()
        name: str = dspy.OutputField()
        age: int = dspy.OutputField()
        alive: bool = dspy.OutputField()
        known_for: list[str] = dspy.OutputField()

    with dspy.context(lm=dspy_lm, adapter=dspy.JSONAdapter()):
        out = dspy.Predict(Facts)(text=PERSON_TEXT)
    assert isinstance(out.name, str) and isinstance(out.age, int)
    assert isinstance(out.alive, bool)
    assert isinstance(out.known_for, list) and all(isinstance(x, str) for x in out.known_for)
    sent = dspy_lm.history[-1]
    schema = sent["kwargs"]["response_format"].model_json_schema()  # a schema, not json_object
    assert set(schema["required"]) == {"name", "age", "alive", "known_for"}
    assert sent["usage"]["completion_tokens"] > 0
