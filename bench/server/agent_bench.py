"""A weather agent on a real model: tools in ``auto`` and a typed final answer, through the
frameworks that send both (the OpenAI Agents SDK with ``OpenAIChatCompletionsModel`` and
``OpenAIResponsesModel``, LangChain's ``create_agent`` with ``ProviderStrategy``, pydantic-ai's
``NativeOutput`` with a tool), and the raw chat-completions request they send (whole and
streamed), against ``stencil serve`` on Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF, Hermes tool
calls), greedy. Prints one row per framework: the turns, the calls (each
validated against the tool's schema), whether the final answer validates against ``Weather``,
and the seconds. The model decides alone to call or to answer; ``--example`` puts one worked
example (Rome: a call, its result, the answer) in the history first (raw request, Agents
SDK).

    python -m bench.server.agent_bench [--model qwen2.5-coder-1.5b] [--example]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time

import jsonschema
from pydantic import BaseModel, Field

from bench.common import table

QUESTION = "What is the weather in Paris right now? Use the tool, then answer."
ROME = '{"city": "Rome", "temperature_c": 25.0, "conditions": "sunny"}'
ITEMS = [  # the worked example as Responses input items (the Agents SDK takes these)
    {"role": "user", "content": "What is the weather in Rome right now?"},
    {"type": "function_call", "call_id": "call_1", "name": "get_weather",
     "arguments": '{"city": "Rome"}'},
    {"type": "function_call_output", "call_id": "call_1", "output": "Rome: 25 C, sunny"},
    {"role": "assistant", "content": ROME},
]  # fmt: skip
INSTRUCTIONS = "You are a weather assistant. Look the weather up with get_weather, then answer."
TOOL_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


class Weather(BaseModel):
    """The weather in a city."""

    city: str
    temperature_c: float
    conditions: str = Field(max_length=60)


class Lookup:
    """``get_weather``: records each call, validated against the tool's schema."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def function(self):
        def get_weather(city: str) -> str:
            """Current weather in a city."""
            jsonschema.validate({"city": city}, TOOL_SCHEMA)
            self.calls.append(city)
            return f"{city}: 18.5 C, light rain"

        return get_weather


def raw_chat(live, lookup: Lookup, example: bool, stream: bool = False) -> tuple[object, int]:
    """The request the frameworks send, by hand: ``tools`` in ``auto`` beside a
    ``json_schema`` response format; each call run and its result sent back, until an answer.
    ``stream``: each reply read from its deltas."""
    client = live.openai()
    tool = {"name": "get_weather", "description": "Current weather in a city.",
            "parameters": TOOL_SCHEMA}  # fmt: skip
    fmt = {"name": "Weather", "schema": Weather.model_json_schema(), "strict": True}
    messages: list[dict] = [{"role": "system", "content": INSTRUCTIONS}]
    if example:
        messages += _chat_example()
    messages.append({"role": "user", "content": QUESTION})
    for turn in range(1, 5):
        reply = client.chat.completions.create(
            model=live.model, messages=messages, max_tokens=120, temperature=0.0,
            tools=[{"type": "function", "function": tool}], tool_choice="auto",
            response_format={"type": "json_schema", "json_schema": fmt}, stream=stream,
        )  # fmt: skip
        message = _from_deltas(reply) if stream else reply.choices[0].message.model_dump()
        if not message.get("tool_calls"):
            return Weather.model_validate_json(message["content"]), turn
        messages.append({k: v for k, v in message.items() if v is not None})
        for call in message["tool_calls"]:
            result = lookup.function()(**json.loads(call["function"]["arguments"]))
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    raise RuntimeError("no answer in 4 turns")


def _from_deltas(chunks) -> dict:
    """A streamed reply's assistant message: the content and the calls joined from deltas."""
    content, calls = "", {}
    for chunk in chunks:
        for choice in chunk.choices:
            content += choice.delta.content or ""
            for d in choice.delta.tool_calls or []:
                call = calls.setdefault(
                    d.index,
                    {"id": d.id, "type": "function", "function": {"name": "", "arguments": ""}},
                )
                call["function"]["name"] += d.function.name or ""
                call["function"]["arguments"] += d.function.arguments or ""
    return {"role": "assistant", "content": content or None, "tool_calls": list(calls.values())}


def _chat_example() -> list[dict]:
    """``ITEMS`` as chat messages."""
    call = {"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": ITEMS[1]["arguments"]}}  # fmt: skip
    return [
        ITEMS[0],
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": ITEMS[2]["output"]},
        ITEMS[3],
    ]


def agents_sdk(live, kind: str, lookup: Lookup, example: bool) -> tuple[object, int]:
    import agents
    from openai import AsyncOpenAI

    agents.set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=live.v1, api_key=live.api_key, max_retries=0)
    cls = agents.OpenAIChatCompletionsModel if kind == "chat" else agents.OpenAIResponsesModel
    agent = agents.Agent(
        name="weather",
        instructions=INSTRUCTIONS,
        tools=[agents.function_tool(lookup.function())],
        output_type=Weather,
        model=cls(model=live.model, openai_client=client),
        model_settings=agents.ModelSettings(temperature=0.0, max_tokens=120),
    )
    question = [*ITEMS, {"role": "user", "content": QUESTION}] if example else QUESTION
    result = agents.Runner.run_sync(agent, question, max_turns=4)
    return result.final_output, len(result.raw_responses)


def langchain(live, lookup: Lookup, example: bool) -> tuple[object, int]:
    from langchain.agents import create_agent
    from langchain.agents.structured_output import ProviderStrategy
    from langchain_core.tools import tool

    agent = create_agent(
        live.langchain(max_tokens=120),
        tools=[tool(lookup.function())],
        system_prompt=INSTRUCTIONS,
        response_format=ProviderStrategy(Weather),
    )
    state = agent.invoke(
        {"messages": [{"role": "user", "content": QUESTION}]}, {"recursion_limit": 8}
    )
    turns = sum(1 for m in state["messages"] if m.type == "ai")
    return state.get("structured_response"), turns


def pydantic_ai(live, lookup: Lookup, example: bool) -> tuple[object, int]:
    from pydantic_ai import Agent, NativeOutput
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_ai.usage import UsageLimits

    provider = OpenAIProvider(base_url=live.v1, api_key=live.api_key)
    agent = Agent(
        OpenAIChatModel(live.model, provider=provider),
        output_type=NativeOutput(Weather),
        instructions=INSTRUCTIONS,
        retries=0,
    )
    agent.tool_plain(lookup.function())
    result = agent.run_sync(
        QUESTION,
        model_settings={"max_tokens": 120, "temperature": 0.0},
        usage_limits=UsageLimits(request_limit=4),
    )
    usage = result.usage() if callable(result.usage) else result.usage  # a method in older releases
    return result.output, usage.requests


RUNS = {
    "raw_chat": raw_chat,
    "raw_chat_stream": lambda live, lookup, ex: raw_chat(live, lookup, ex, stream=True),
    "agents_chat": lambda live, lookup, example: agents_sdk(live, "chat", lookup, example),
    "agents_responses": lambda live, lookup, ex: agents_sdk(live, "responses", lookup, ex),
    "langchain": langchain,
    "pydantic_ai": pydantic_ai,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--frameworks", nargs="+", default=list(RUNS), choices=list(RUNS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--example", action="store_true", help="one worked example in the history")
    args = ap.parse_args()
    from stencil.engine.async_engine import AsyncLLMEngine
    from stencil.engine.config import EngineConfig
    from stencil.testing.live_server import serving
    from stencil.testing.real_models import real_model_path

    path = real_model_path(args.model)
    config = EngineConfig(model=str(path), seed=0, max_model_len=4096, num_threads=args.threads)
    rows = []
    with serving(AsyncLLMEngine.from_config(config)) as live:
        for name in args.frameworks:
            lookup, start = Lookup(), time.perf_counter()
            try:
                final, turns = RUNS[name](live, lookup, args.example)
                valid = isinstance(final, Weather)
                if valid:
                    jsonschema.validate(final.model_dump(mode="json"), Weather.model_json_schema())
                outcome = final.model_dump_json() if valid else repr(final)
            except Exception as e:  # a turn limit reached: the model kept calling
                turns, valid, outcome = "-", False, f"{type(e).__name__}: {e}"[:120]
            seconds = time.perf_counter() - start
            rows.append([name, turns, len(lookup.calls), valid, outcome, f"{seconds:.0f}"])
            print(rows[-1], flush=True)
            asyncio.set_event_loop(asyncio.new_event_loop())  # the SDKs close theirs
    print(f"model: {path.name}; load average: {os.getloadavg()[0]:.2f}")
    headers = ["framework", "model turns", "valid calls", "final Weather valid", "final", "s"]
    print(table(headers, rows))


if __name__ == "__main__":
    main()
