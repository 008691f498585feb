"""Agents with tools and a structured final answer against a live server with the embedded
SmolLM2: ``tool_choice: "auto"`` together with a response format (chat ``response_format``,
Responses ``text.format``) is one constraint, the calls or the answer. The raw requests with the
``openai`` client (both branches, streamed and not), the OpenAI Agents SDK
(``Agent(tools=..., output_type=...)`` through ``OpenAIChatCompletionsModel`` and
``OpenAIResponsesModel``), LangChain 1.x ``create_agent(..., response_format=ProviderStrategy)``
and pydantic-ai ``Agent(output_type=NativeOutput(...))`` with a ``tool_plain``. Every request
succeeds (no 4xx); every final answer validates against its model and every call's arguments
against its tool's schema (jsonschema). The tests check structure and protocol, not the 135M
model's judgement: greedy, it answers without calling; the call branch is taken where
``logit_bias`` favours the call syntax's first token."""

from __future__ import annotations

import json

import jsonschema
import pytest
from pydantic import BaseModel, Field

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 20}},
            "required": ["city"],
        },
    },
}
TOOL_SCHEMA = WEATHER_TOOL["function"]["parameters"]
PROMPT = "What is the weather in Paris? Answer with the city and the conditions."


class Weather(BaseModel):
    """The weather in a city."""

    city: str = Field(max_length=20)
    conditions: str = Field(max_length=40)
    tags: set[str] = Field(default_factory=set, max_length=3)  # uniqueItems: a decode-time check


WEATHER_SCHEMA = Weather.model_json_schema()
RESPONSE_FORMAT = {
    "type": "json_schema",
    "json_schema": {"name": "Weather", "schema": WEATHER_SCHEMA, "strict": False},
}


def _valid_answer(text: str | None) -> None:
    jsonschema.validate(json.loads(text or ""), WEATHER_SCHEMA)


def _valid_call(name: str, arguments: str) -> None:
    assert name == "get_weather"
    jsonschema.validate(json.loads(arguments), TOOL_SCHEMA)


@pytest.fixture(scope="module")
def bias(live_server):
    """``logit_bias`` that takes a branch: for (``calls``) or against (``answer``) the first
    token of SmolLM2's call block (``<tool_call>``)."""
    (lt,) = live_server.engine.tokenizer.encode("<", add_special_tokens=False)
    return {"calls": {str(lt): 100}, "answer": {str(lt): -100}}


# ---- the raw requests ----------------------------------------------------------------------


def _chat(client, model, **kw):
    body = {
        "model": model,
        "messages": [{"role": "user", "content": PROMPT}],
        "tools": [WEATHER_TOOL],
        "tool_choice": "auto",
        "response_format": RESPONSE_FORMAT,
        "max_tokens": 80,
        "temperature": 0,
    }
    return client.chat.completions.create(**(body | kw))


def test_chat_auto_with_response_format_answers(client, model, bias):
    choice = _chat(client, model, logit_bias=bias["answer"]).choices[0]
    assert choice.finish_reason == "stop" and not choice.message.tool_calls
    _valid_answer(choice.message.content)


def test_chat_auto_with_response_format_calls(client, model, bias):
    choice = _chat(client, model, logit_bias=bias["calls"]).choices[0]
    assert choice.finish_reason == "tool_calls" and not choice.message.content
    for call in choice.message.tool_calls:
        _valid_call(call.function.name, call.function.arguments)


@pytest.mark.parametrize("branch", ["answer", "calls"])
def test_chat_streams_the_branch_it_took(client, model, bias, branch):
    kw = {"logit_bias": bias[branch]}
    whole = _chat(client, model, **kw).choices[0]
    chunks = [c for c in _chat(client, model, stream=True, **kw) if c.choices]
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    calls = [tc for c in chunks for tc in c.choices[0].delta.tool_calls or []]
    assert chunks[-1].choices[0].finish_reason == whole.finish_reason
    assert text == (whole.message.content or "")
    expected = [(c.function.name, c.function.arguments) for c in whole.message.tool_calls or []]
    assert [(c.function.name, c.function.arguments) for c in calls] == expected


@pytest.mark.parametrize(
    "choice", ["required", {"type": "function", "function": {"name": "get_weather"}}]
)
def test_forced_calls_ignore_the_response_format(client, model, choice):
    r = _chat(client, model, tool_choice=choice).choices[0]
    assert r.finish_reason == "tool_calls"
    for call in r.message.tool_calls:
        _valid_call(call.function.name, call.function.arguments)


def test_tool_choice_none_is_the_format_only(client, model, bias):
    choice = _chat(client, model, tool_choice="none", logit_bias=bias["calls"])
    assert choice.choices[0].finish_reason == "stop"
    _valid_answer(choice.choices[0].message.content)


def _responses(client, model, **kw):
    return client.responses.create(**(_responses_body(model) | kw))


def _responses_body(model: str) -> dict:
    return {
        "model": model,
        "input": PROMPT,
        "tools": [{"type": "function", **WEATHER_TOOL["function"]}],
        "tool_choice": "auto",
        "text": {"format": {"type": "json_schema", "name": "Weather", "schema": WEATHER_SCHEMA}},
        "max_output_tokens": 80,
        "temperature": 0,
    }


@pytest.mark.parametrize("stream", [False, True])
def test_responses_auto_with_text_format_calls(client, model, stream):
    if not stream:
        r = _responses(client, model)
    else:
        with client.responses.stream(**_responses_body(model)) as events:
            kinds = [e.type for e in events]
            r = events.get_final_response()
        assert "response.function_call_arguments.done" in kinds
    assert r.status == "completed" and r.output
    for item in r.output:
        assert item.type == "function_call"
        _valid_call(item.name, item.arguments)


@pytest.mark.parametrize("stream", [False, True])
def test_responses_answer_after_the_tool_output(client, model, stream):
    """A call, its output as ``function_call_output``, then the answer in ``text.format``
    (after one worked example in the input: unprompted, the 135M model calls again)."""
    first = _responses(client, model, input=ITEMS)
    (call,) = first.output
    assert call.type == "function_call"
    _valid_call(call.name, call.arguments)
    output = {"type": "function_call_output", "call_id": call.call_id, "output": PARIS}
    body = _responses_body(model) | {"input": [output], "previous_response_id": first.id}
    if not stream:
        r = client.responses.create(**body)
    else:
        with client.responses.stream(**body) as events:
            kinds = [e.type for e in events]
            r = events.get_final_response()
        assert "response.output_text.done" in kinds
    assert r.status == "completed" and [i.type for i in r.output] == ["message"]
    _valid_answer(r.output_text)


# ---- the frameworks ------------------------------------------------------------------------
# Each agent starts from one worked example (Rome: a call, its result, the answer), as items of
# its own framework, then asks for Paris: the 135M model calls the tool, reads its result and
# answers (unprompted it calls the tool again at every turn, until the framework's turn limit).

ROME, PARIS = "sunny, 25 C in Rome", "rainy, 12 C in Paris"
EXAMPLE_ANSWER = '{"city": "Rome", "conditions": "sunny, 25 C", "tags": []}'
QUESTION = "What is the weather in Paris?"
ITEMS = [  # Responses API input items (the Agents SDK takes these too)
    {"role": "user", "content": "What is the weather in Rome?"},
    {
        "type": "function_call",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city": "Rome"}',
    },
    {"type": "function_call_output", "call_id": "call_1", "output": ROME},
    {"role": "assistant", "content": EXAMPLE_ANSWER},
    {"role": "user", "content": QUESTION},
]


class WeatherTool:
    """``get_weather`` for the frameworks: records its calls, each validated against the
    tool's schema as the server's constraint made it."""

    def __init__(self) -> None:
        self.cities: list[str] = []

    def __call__(self, city: str) -> str:
        """Current weather in a city."""
        jsonschema.validate({"city": city}, TOOL_SCHEMA)
        self.cities.append(city)
        return PARIS if city == "Paris" else f"cloudy in {city}"

    def function(self):
        def get_weather(city: str) -> str:
            """Current weather in a city."""
            return self(city)

        return get_weather


def _valid_final(obj: object) -> None:
    assert isinstance(obj, Weather), obj
    jsonschema.validate(obj.model_dump(mode="json"), WEATHER_SCHEMA)


@pytest.fixture(scope="module")
def agents_sdk():
    import agents

    agents.set_tracing_disabled(True)  # traces would be exported to OpenAI's platform
    return agents


@pytest.mark.parametrize("kind", ["chat", "responses"])
def test_agents_sdk_tools_and_output_type(agents_sdk, live_server, kind):
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=live_server.v1, api_key=live_server.api_key, max_retries=0)
    models = {
        "chat": agents_sdk.OpenAIChatCompletionsModel,
        "responses": agents_sdk.OpenAIResponsesModel,
    }
    tool = WeatherTool()
    agent = agents_sdk.Agent(
        name="weather",
        tools=[agents_sdk.function_tool(tool.function())],
        output_type=Weather,
        model=models[kind](model=live_server.model, openai_client=client),
        model_settings=agents_sdk.ModelSettings(temperature=0.0, max_tokens=80),
    )
    result = agents_sdk.Runner.run_sync(agent, ITEMS, max_turns=4)
    _valid_final(result.final_output)
    assert tool.cities == ["Paris"]
    calls = [i.raw_item for i in result.new_items if i.type == "tool_call_item"]
    for call in calls:
        _valid_call(call.name, call.arguments)


def test_langchain_create_agent_provider_strategy(live_server):
    from langchain.agents import create_agent
    from langchain.agents.structured_output import ProviderStrategy
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.tools import tool as as_tool

    tool = WeatherTool()
    agent = create_agent(
        live_server.langchain(max_tokens=80),
        tools=[as_tool(tool.function())],
        response_format=ProviderStrategy(Weather),
    )
    call = {"name": "get_weather", "args": {"city": "Rome"}, "id": "call_1"}
    messages = [
        HumanMessage("What is the weather in Rome?"),
        AIMessage("", tool_calls=[call]),
        ToolMessage(ROME, tool_call_id="call_1"),
        AIMessage(EXAMPLE_ANSWER),
        HumanMessage(QUESTION),
    ]
    state = agent.invoke({"messages": messages}, {"recursion_limit": 8})
    _valid_final(state["structured_response"])
    assert tool.cities == ["Paris"]
    for message in state["messages"][len(messages) :]:
        for c in getattr(message, "tool_calls", None) or []:
            _valid_call(c["name"], json.dumps(c["args"]))


def test_pydantic_ai_native_output_with_a_tool(live_server):
    from pydantic_ai import Agent, NativeOutput
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_ai.usage import UsageLimits

    provider = OpenAIProvider(base_url=live_server.v1, api_key=live_server.api_key)
    model = OpenAIChatModel(live_server.model, provider=provider)
    agent = Agent(model, output_type=NativeOutput(Weather), retries=0)
    tool = WeatherTool()
    agent.tool_plain(tool.function())
    history = [
        ModelRequest(parts=[UserPromptPart("What is the weather in Rome?")]),
        ModelResponse(parts=[ToolCallPart("get_weather", {"city": "Rome"}, "call_1")]),
        ModelRequest(parts=[ToolReturnPart("get_weather", ROME, "call_1")]),
        ModelResponse(parts=[TextPart(EXAMPLE_ANSWER)]),
    ]
    result = agent.run_sync(
        QUESTION,
        message_history=history,
        model_settings={"max_tokens": 80, "temperature": 0.0},
        usage_limits=UsageLimits(request_limit=4),
    )
    _valid_final(result.output)
    assert tool.cities == ["Paris"]
    for message in result.new_messages():
        for part in getattr(message, "parts", []):
            if isinstance(part, ToolCallPart):
                _valid_call(part.tool_name, part.args_as_json_str())
