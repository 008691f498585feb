"""``tool_choice: "auto"`` with the embedded model: on 20 labeled prompts (10 need a tool, 10 do
not), how many get a call and how many get text, for each way the constraint offers the call:

- ``anywhere``: text, and a call wherever the model writes the trigger (``<tool_call>``);
- ``first``: text or a call, decided at the first token (text may not start with the trigger).

Each prompt runs through the server's own conversion (chat template, tool prompt, constraint),
greedy and sampled; calls are checked against the tools' schemas with jsonschema.

    python -m bench.server.tool_choice_bench [--max-tokens 64] [--threads 2] [--seeds 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import json

import jsonschema

from bench.common import table
from stencil import LLM, default_model_path
from stencil.api.model_info import ModelInfo
from stencil.api.openai.convert import convert_chat
from stencil.api.openai.protocol import ChatCompletionRequest
from stencil.api.tools.formats import SMOLLM2


def _tool(name: str, description: str, props: dict) -> dict:
    schema = {"type": "object", "properties": props, "required": list(props)}
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": schema},
    }


TOOLS = [
    _tool("get_weather", "Get the current weather in a city", {"city": {"type": "string"}}),
    _tool(
        "convert_currency",
        "Convert an amount of money from one currency to another",
        {
            "amount": {"type": "number"},
            "from_currency": {"type": "string"},
            "to_currency": {"type": "string"},
        },
    ),
    _tool(
        "get_time",
        "Get the current local time in a timezone",
        {"timezone": {"type": "string"}},
    ),
]
NEEDS_TOOL = [
    "What's the weather in Paris right now?",
    "Is it raining in Tokyo at the moment?",
    "How warm is it in Madrid today?",
    "Tell me the current weather in Berlin.",
    "Convert 100 US dollars to euros.",
    "How many Japanese yen is 50 British pounds right now?",
    "Change 20 euros into Swiss francs.",
    "What time is it in New York right now?",
    "Tell me the current local time in Europe/London.",
    "What's the time in Asia/Tokyo at the moment?",
]
NO_TOOL = [
    "Write a haiku about autumn.",
    "What is the capital of France?",
    "Explain what photosynthesis is in one sentence.",
    "Say hello to my friend Alice.",
    "Translate 'good morning' into Spanish.",
    "What is 7 times 8?",
    "Give me three tips for sleeping better.",
    "Who wrote Romeo and Juliet?",
    "Summarize the plot of Cinderella in two sentences.",
    "Suggest a name for a pet goldfish.",
]
VARIANTS = {"anywhere": SMOLLM2, "first": dataclasses.replace(SMOLLM2, calls_first=True)}


def run_variant(llm: LLM, fmt, max_tokens: int, temperature: float, seed: int) -> dict:
    tok = llm.get_tokenizer()
    info = ModelInfo(tok, 2048, len(tok), tool_format=fmt)
    plans = []
    for prompt in NEEDS_TOOL + NO_TOOL:
        body = {"model": "m", "messages": [{"role": "user", "content": prompt}], "tools": TOOLS}
        body |= {"max_tokens": max_tokens, "temperature": temperature, "seed": seed}
        plans.append(convert_chat(ChatCompletionRequest.model_validate(body), info))
    outs = llm.generate([p.prompt_ids for p in plans], [p.params for p in plans], use_tqdm=False)
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    called, valid = [], 0
    for out in outs:
        _, calls = fmt.parse(out.outputs[0].text)
        called.append(calls is not None)
        for c in calls or []:
            valid += c["name"] in schemas and jsonschema.Draft202012Validator(
                schemas[c["name"]]
            ).is_valid(c["arguments"])
    n = len(NEEDS_TOOL)
    return {
        "tool_called": sum(called[:n]),
        "text_answered": n - sum(called[n:]),
        "valid_calls": valid,
        "calls": sum(called),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seeds", type=int, default=3, help="sampled runs (temperature 0.7)")
    args = ap.parse_args()
    llm = LLM(model=str(default_model_path()), num_threads=args.threads, seed=0)
    runs = [(0.0, 0)] + [(0.7, s) for s in range(args.seeds)]
    rows = []
    for name, fmt in VARIANTS.items():
        for temperature, seed in runs:
            r = run_variant(llm, fmt, args.max_tokens, temperature, seed)
            label = "greedy" if temperature == 0 else f"T=0.7 seed {seed}"
            rows.append(
                [
                    name,
                    label,
                    f"{r['tool_called']}/{len(NEEDS_TOOL)}",
                    f"{r['text_answered']}/{len(NO_TOOL)}",
                    f"{r['valid_calls']}/{r['calls']}",
                ]
            )
    headers = ["auto offers", "decoding", "tool prompts -> call", "other -> text", "valid calls"]
    print(json.dumps({"max_tokens": args.max_tokens, "prompts": 20}))
    print(table(headers, rows))


if __name__ == "__main__":
    main()
