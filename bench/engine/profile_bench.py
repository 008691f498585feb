"""Where a step's time goes, Stencil beside vLLM: the engine_bench workload (fewer requests) under
``torch.profiler`` (CPU, no shapes), self CPU time per op category for both engines, the linears'
achieved GFLOP/s and a measured GEMM roof on the same threads.

    python -m bench.engine.profile_bench [--requests 16] [--dtype float32|bfloat16] [--threads 2]
                                  [--shape smollm2|qwen2.5-0.5b] [--no-vllm] [--no-roof]

Stencil runs in this process with ``record_function`` labels on its C ops (ctypes calls the
profiler cannot see otherwise), the vocab projection (``lm_head``) and the sampler; vLLM runs in
its venv (``bench/peers/vllm_profile_runner.py``, engine core in-process) with the same two labels on
its ``LogitsProcessor`` and ``Sampler``, and inductor's kernel profiling on so its fused kernels
have names. Both engines warmed on a prompt outside the workload, prefix caching on for both.
"Scheduler / Python" is wall time minus all profiled self time. Profiling adds per-op overhead to
both (more to whichever issues more ops): read shares, not absolute speed.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time

import torch
from torch.profiler import ProfilerActivity, profile

from bench.common import median_seconds, run_vllm, table, vllm_python
from bench.engine.engine_bench import SHAPES, warmed_stencil
from bench.engine.profile_categories import CATEGORIES, categorize, labelled
from bench.shapes import qwen_05b_dir
from bench.workload import make_workload
from stencil import SamplingParams, default_model_path
from stencil.kernels import cpu_linear

C_OPS = (
    "paged_attention",
    "write_kv",
    "rms_norm",
    "fused_add_rms_norm",
    "rotary_embedding",
    "silu_and_mul",
    "linear",
)
PYTHON = "scheduler / Python (unprofiled)"


def profile_stencil(model_dir, items, threads, dtype) -> dict:
    llm = warmed_stencil(model_dir, items, threads, dtype)
    eng = llm.engine
    runner = eng.runner
    ops = {n: labelled(f"stencil::{n}", getattr(runner.ops, n)) for n in C_OPS}
    runner.ops = dataclasses.replace(runner.ops, **ops)
    runner.model.compute_logits = labelled("lm_head", runner.model.compute_logits)
    eng.sampler = labelled("sampling", eng.sampler)
    eng.guided.apply = labelled("sampling", eng.guided.apply)
    before = eng.get_metrics()["generation_tokens_total"]
    for i, it in enumerate(items):
        params = SamplingParams(temperature=0, max_tokens=it.max_tokens, ignore_eos=True)
        eng.add_request(f"p{i}", it.prompt_ids, params)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=False) as prof:
        t = time.perf_counter()
        while eng.has_unfinished_requests():
            eng.step()
        wall = time.perf_counter() - t
    per_cat, top = categorize(prof.events())
    tokens = int(eng.get_metrics()["generation_tokens_total"] - before)
    return {"wall_ms": wall * 1000, "output_tokens": tokens, "categories": per_cat, "top": top}


def profile_vllm(model_dir, items, threads, dtype) -> dict | None:
    jobs = [{"prompt_ids": i.prompt_ids, "max_tokens": i.max_tokens} for i in items]
    env = {
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
        "TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE": "1",
        # in-process, vLLM would drop the (shared) torch pool to 1 thread unless this is set
        "OMP_NUM_THREADS": str(threads),
    }
    return run_vllm(model_dir, jobs, threads, dtype=dtype, runner="vllm_profile_runner", env=env)


def linear_flops(config, items) -> tuple[float, float]:
    """FLOPs of the decoder layers' linears and of the lm_head over the workload: every prompt and
    output token but each request's last goes through the layers; one vocab row per output token."""
    hd = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    h, heads = config.hidden_size, config.num_attention_heads
    kv = getattr(config, "num_key_value_heads", None) or heads
    per_layer = h * (heads + 2 * kv) * hd + heads * hd * h + 3 * h * config.intermediate_size
    tokens = sum(len(i.prompt_ids) + i.max_tokens - 1 for i in items)
    rows = sum(i.max_tokens for i in items)
    return (
        2.0 * tokens * per_layer * config.num_hidden_layers,
        2.0 * rows * h * config.vocab_size,
    )


def breakdown(results: dict[str, dict], flops: tuple[float, float]) -> str:
    rows = []
    for cat in [*CATEGORIES, PYTHON]:
        row = [cat]
        for r in results.values():
            ms = r["categories"].get(cat, r["wall_ms"] - sum(r["categories"].values()))
            row += [f"{ms:,.0f}", f"{100 * ms / r['wall_ms']:.1f}%"]
        rows.append(row)
    rows.append(["**wall**", *[x for r in results.values() for x in (f"{r['wall_ms']:,.0f}", "")]])
    rows.append(
        [
            "output tok/s (under the profiler)",
            *[x for r in results.values() for x in (f"{tok_s(r):.1f}", "")],
        ]
    )
    for label, cat, f in (("linears", "linears", flops[0]), ("lm_head", "lm_head", flops[1])):
        rows.append(
            [
                f"{label} achieved GFLOP/s ({f / 1e9:,.0f} GFLOP)",
                *[
                    x
                    for r in results.values()
                    for x in (f"{f / 1e6 / max(r['categories'][cat], 1e-9):.0f}", "")
                ],
            ]
        )
    headers = ["category (self CPU time)"]
    for name in results:
        headers += [f"{name} ms", "%"]
    return table(headers, rows)


def tok_s(r: dict) -> float:
    return r["output_tokens"] / r["wall_ms"] * 1000


def gemm_roof(config, dtype: torch.dtype) -> list[list]:
    """GFLOP/s of ``torch.mm`` and of the packed oneDNN linear Stencil runs, per shape."""
    hd = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    h, heads = config.hidden_size, config.num_attention_heads
    kv = getattr(config, "num_key_value_heads", None) or heads
    shapes = [
        ("square 2048", 2048, 2048, 2048),
        ("qkv_proj", None, h, (heads + 2 * kv) * hd),
        ("o_proj", None, heads * hd, h),
        ("gate_up_proj", None, h, 2 * config.intermediate_size),
        ("down_proj", None, config.intermediate_size, h),
        ("lm_head", 64, h, config.vocab_size),
    ]
    rows = []
    for name, m_fixed, k, n in shapes:
        for m in [m_fixed] if m_fixed else [64, 1024]:
            x = torch.randn(m, k, dtype=dtype)
            w = torch.randn(n, k, dtype=dtype)
            wt = w.t().contiguous().t()  # [n, k] as torch.mm's [k, n] operand below
            packed = cpu_linear.pack_weight(w)
            flop = 2.0 * m * k * n
            reps = max(3, min(50, int(2e10 / flop)))
            mm = median_seconds(lambda x=x, wt=wt: torch.mm(x, wt.t()), reps)
            one = median_seconds(lambda x=x, p=packed: cpu_linear.linear(x, p), reps)
            rows.append(
                [f"{name} {m}x{k}x{n}", f"{flop / mm / 1e9:.0f}", f"{flop / one / 1e9:.0f}"]
            )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="smollm2", choices=sorted(SHAPES))
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--no-vllm", action="store_true")
    ap.add_argument("--no-roof", action="store_true")
    args = ap.parse_args()
    if not args.no_vllm:
        vllm_python()  # before any run: exits naming $STENCIL_VLLM_PYTHON when it is unset
    model_dir = default_model_path() if args.shape == "smollm2" else qwen_05b_dir()
    from transformers import AutoConfig, AutoTokenizer

    _, prompts, outputs = SHAPES[args.shape]
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    items = make_workload(tok, n=args.requests, prompt_range=prompts, output_range=outputs)
    config = AutoConfig.from_pretrained(str(model_dir))
    loads, results = [], {}
    loads.append(os.getloadavg()[0])
    results["Stencil"] = profile_stencil(model_dir, items, args.threads, args.dtype)
    if not args.no_vllm:
        loads.append(os.getloadavg()[0])
        res = profile_vllm(model_dir, items, args.threads, args.dtype)
        if res is not None:
            results["vLLM 0.32"] = res
    loads.append(os.getloadavg()[0])
    print(
        f"\n{len(items)} requests, {sum(len(i.prompt_ids) for i in items):,} prompt + "
        f"{sum(i.max_tokens for i in items):,} output tokens, ignore_eos, greedy, {args.shape} "
        f"{args.dtype}, {args.threads} threads; 1-minute load before each engine / after: "
        + " / ".join(f"{x:.1f}" for x in loads)
        + "\n"
    )
    print(breakdown(results, linear_flops(config, items)))
    for name, r in results.items():
        top = ", ".join(f"{k} {v:,.0f}" for k, v in list(r["top"].items())[:12])
        print(f"\n{name} top ops (self ms): {top}")
    if not args.no_roof:
        torch.set_num_threads(args.threads)
        dtype = getattr(torch, args.dtype)
        print(f"\nGEMM roof, {args.dtype}, {args.threads} threads (GFLOP/s, medians)\n")
        print(
            table(
                ["shape (m x k x n)", "torch.mm", "oneDNN packed (Stencil)"],
                gemm_roof(config, dtype),
            )
        )


if __name__ == "__main__":
    main()
