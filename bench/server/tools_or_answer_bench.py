"""Tools in ``auto`` beside a response format on a real model: for the 20 labeled prompts of
``tool_choice_bench`` (10 need one of 3 tools, 10 need none), the raw chat-completions loop an
agent runs (the tools, ``tool_choice: "auto"``, a ``json_schema`` answer ``{"answer": str}``;
each call answered with a canned result; ``--system``: a system message first) against
``stencil serve``, greedy. Prints how often the first turn calls the fitting tool or answers at
once, how many calls validate against their tool's schema, and how many loops end with a valid
answer within 3 turns.

    python -m bench.server.tools_or_answer_bench [--model qwen2.5-coder-1.5b] [--system TEXT]
"""

from __future__ import annotations

import argparse
import json
import os

import jsonschema

from bench.common import table
from bench.server.tool_choice_bench import NEEDS_TOOL, NO_TOOL, TOOLS

FITS = ["get_weather"] * 4 + ["convert_currency"] * 3 + ["get_time"] * 3  # NEEDS_TOOL's tools
RESULTS = {"get_weather": "18.5 C, light rain", "convert_currency": "92.10", "get_time": "14:05"}
ANSWER = {
    "type": "object",
    "properties": {"answer": {"type": "string", "maxLength": 300}},
    "required": ["answer"],
    "additionalProperties": False,
}
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


def run_loop(client, model: str, prompt: str, system: str, turns: int = 3) -> dict:
    """One agent loop: the calls of each turn (name, arguments valid) and the final answer."""
    messages: list[dict] = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": prompt})
    out = {"calls": [], "answer": None, "first": None}
    for _ in range(turns):
        message = (
            client.chat.completions.create(
                model=model, messages=messages, tools=TOOLS, tool_choice="auto",
                response_format={"type": "json_schema",
                                 "json_schema": {"name": "Answer", "schema": ANSWER}},
                max_tokens=120, temperature=0.0,
            ).choices[0].message
        )  # fmt: skip
        calls = message.tool_calls or []
        out["first"] = out["first"] or ([c.function.name for c in calls] or "answer")
        if not calls:
            out["answer"] = json.loads(message.content)
            jsonschema.validate(out["answer"], ANSWER)
            return out
        messages.append(message.model_dump(exclude_none=True))
        for c in calls:
            args = json.loads(c.function.arguments)
            valid = jsonschema.Draft202012Validator(SCHEMAS[c.function.name]).is_valid(args)
            out["calls"].append((c.function.name, valid))
            messages.append(
                {"role": "tool", "tool_call_id": c.id, "content": RESULTS[c.function.name]}
            )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--system", default="", help="a system message before each prompt")
    args = ap.parse_args()
    from stencil.engine.async_engine import AsyncLLMEngine
    from stencil.engine.config import EngineConfig
    from stencil.testing.live_server import serving
    from stencil.testing.real_models import real_model_path

    path = real_model_path(args.model)
    config = EngineConfig(model=str(path), seed=0, max_model_len=4096, num_threads=args.threads)
    with serving(AsyncLLMEngine.from_config(config)) as live:
        client = live.openai()
        runs = [run_loop(client, live.model, p, args.system) for p in NEEDS_TOOL + NO_TOOL]
    n = len(NEEDS_TOOL)
    for prompt, r in zip(NEEDS_TOOL + NO_TOOL, runs, strict=True):
        print(json.dumps({"prompt": prompt, **r}))
    calls = [c for r in runs for c in r["calls"]]
    row = [
        f"{sum(r['first'] == [fit] for r, fit in zip(runs[:n], FITS, strict=True))}/{n}",
        f"{sum(r['first'] == 'answer' for r in runs[n:])}/{len(NO_TOOL)}",
        f"{sum(valid for _, valid in calls)}/{len(calls)}",
        f"{sum(r['answer'] is not None for r in runs[:n])}/{n}",
        f"{sum(r['answer'] is not None for r in runs[n:])}/{len(NO_TOOL)}",
    ]
    print(f"model: {path.name}; load average: {os.getloadavg()[0]:.2f}")
    headers = ["tool prompts: first turn calls the fitting tool", "other prompts: answers at once",
               "valid calls", "tool prompts: valid answer in 3 turns",
               "other prompts: valid answer in 3 turns"]  # fmt: skip
    print(table(headers, [row]))


if __name__ == "__main__":
    main()
