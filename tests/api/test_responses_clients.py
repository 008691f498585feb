"""Frameworks that speak the Responses API, unchanged, against a live server with the embedded
SmolLM2: the OpenAI Agents SDK (``OpenAIResponsesModel`` and ``OpenAIChatCompletionsModel``),
LangChain's ``ChatOpenAI(use_responses_api=True)`` and pydantic-ai's ``OpenAIResponsesModel``.
Each test asserts structure and protocol (types, schema validity, the tool run), not the 135M
model's judgement."""

from __future__ import annotations

import jsonschema
import pytest
from pydantic import BaseModel, Field

PERSON_TEXT = "Ada Lovelace was 36 years old."


class Person(BaseModel):
    """Information about a person."""

    name: str = Field(description="Full name", max_length=24)
    age: int = Field(ge=0, le=150)


def _valid(obj: object, cls: type[BaseModel]) -> None:
    assert isinstance(obj, cls), obj
    jsonschema.validate(obj.model_dump(mode="json"), cls.model_json_schema())


# ---- the OpenAI Agents SDK ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def agents_sdk():
    import agents

    agents.set_tracing_disabled(True)  # traces would be exported to OpenAI's platform
    return agents


def _agent_model(agents_sdk, live_server, kind: str):
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=live_server.v1, api_key=live_server.api_key, max_retries=0)
    cls = {
        "responses": agents_sdk.OpenAIResponsesModel,
        "chat": agents_sdk.OpenAIChatCompletionsModel,
    }
    return cls[kind](model=live_server.model, openai_client=client)


@pytest.mark.parametrize("kind", ["responses", "chat"])
def test_agent_output_type(agents_sdk, live_server, kind):
    agent = agents_sdk.Agent(
        name="extractor",
        instructions="Extract the person from the text.",
        output_type=Person,
        model=_agent_model(agents_sdk, live_server, kind),
        model_settings=agents_sdk.ModelSettings(temperature=0.0, max_tokens=60),
    )
    result = agents_sdk.Runner.run_sync(agent, PERSON_TEXT, max_turns=1)
    _valid(result.final_output, Person)


def test_agent_named_tool_runs_and_finishes(agents_sdk, live_server):
    cities: list[str] = []

    @agents_sdk.function_tool
    def get_weather(city: str) -> str:
        """Get the current weather for a city."""
        cities.append(city)
        return f"sunny in {city}"

    agent = agents_sdk.Agent(
        name="weather",
        instructions="Answer with the weather tool.",
        tools=[get_weather],
        model=_agent_model(agents_sdk, live_server, "responses"),
        model_settings=agents_sdk.ModelSettings(
            tool_choice="get_weather", temperature=0.0, max_tokens=60
        ),
        tool_use_behavior="stop_on_first_tool",
    )
    result = agents_sdk.Runner.run_sync(agent, "What is the weather in Paris?", max_turns=2)
    assert len(cities) == 1 and isinstance(cities[0], str)
    assert result.final_output == f"sunny in {cities[0]}"
    kinds = [item.type for item in result.new_items]
    assert kinds[:2] == ["tool_call_item", "tool_call_output_item"]


# ---- LangChain, Responses API mode --------------------------------------------------------------


@pytest.fixture(scope="module")
def chat(live_server):
    return live_server.langchain(max_tokens=60, use_responses_api=True)


def test_langchain_responses_invoke_and_stream(chat):
    message = chat.invoke("Say hello.")
    assert message.text and message.response_metadata["status"] in ("completed", "incomplete")
    assert message.usage_metadata["output_tokens"] >= 1
    chunks = list(chat.stream("Say hello."))
    assert "".join(c.text for c in chunks) == message.text  # greedy: the same text


@pytest.mark.parametrize("method", ["json_schema", "function_calling"])
def test_langchain_responses_structured_output(chat, method):
    _valid(chat.with_structured_output(Person, method=method).invoke(PERSON_TEXT), Person)


# ---- pydantic-ai, Responses API model -----------------------------------------------------------


@pytest.fixture(scope="module")
def pai_responses(live_server):
    from pydantic_ai.models.openai import OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider

    provider = OpenAIProvider(base_url=live_server.v1, api_key=live_server.api_key)
    return OpenAIResponsesModel(live_server.model, provider=provider)


@pytest.mark.parametrize("wrapper", ["NativeOutput", "ToolOutput"])
def test_pydantic_ai_responses_model(pai_responses, wrapper):
    import pydantic_ai

    agent = pydantic_ai.Agent(
        pai_responses, output_type=getattr(pydantic_ai, wrapper)(Person), retries=0
    )
    result = agent.run_sync(PERSON_TEXT, model_settings={"max_tokens": 60, "temperature": 0.0})
    _valid(result.output, Person)
    raw = [m for m in result.all_messages() if isinstance(m, pydantic_ai.messages.ModelResponse)]
    parts = [type(p).__name__ for p in raw[0].parts]
    assert ("ToolCallPart" in parts) == (wrapper == "ToolOutput"), parts
