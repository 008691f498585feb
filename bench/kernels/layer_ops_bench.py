"""The C layer ops (``kernels/csrc/layer_ops.c``) against their torch twins (``reference``), per op
and per decode step of the engine.

    python -m bench.kernels.layer_ops_bench [--threads 1] [--dtype float32] [--rounds 5] [--steps 10]

1. Per op, median microseconds, SmolLM2-135M's shapes (hidden 576, 9 q / 3 kv heads of 64, MLP
   1536) at decode (64 rows) and prefill (1024 rows), float32 and bfloat16; and greedy sampling of
   64 rows over the 49,152-token vocabulary (a torch argmax per row vs the sampler's one batched
   numpy argmax).
2. One decode step of the embedded model (64 sequences, 128-token prompts, prefilled first):
   ``ModelRunner.execute`` on the same scheduled batch with the CPU kernel set as it is (fused)
   and with its layer ops swapped for the twins (reference), alternated step by step (A B A B),
   ``--steps`` pairs per round: each round's median step, the median of all, the median of the
   paired ratios (twin step / fused step), and the 1-minute load before each round.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import torch

from bench.common import median, median_seconds, table
from stencil import LLM, SamplingParams, default_model_path
from stencil.engine.sampler import argmax_rows
from stencil.kernels import get_kernels, reference, with_layer_op_twins

HIDDEN, HEADS, KV_HEADS, DIM, INTER, VOCAB = 576, 9, 3, 64, 1536, 49152


def median_us(fn: Callable[[], object], reps: int) -> float:
    return 1e6 * median_seconds(fn, reps, warmup=5)


def op_cases(rows: int, dtype: torch.dtype, ops) -> dict[str, tuple[Callable, Callable]]:
    """name -> (reference call, C call) on fresh inputs of the model's shapes."""
    x, res, w = (torch.randn(*s).to(dtype) for s in ((rows, HIDDEN), (rows, HIDDEN), (HIDDEN,)))
    out = torch.empty_like(x)
    qkv = torch.randn(rows, (HEADS + 2 * KV_HEADS) * DIM).to(dtype)
    q, k, v = qkv.split([HEADS * DIM, KV_HEADS * DIM, KV_HEADS * DIM], -1)
    q, k, v = q.view(rows, HEADS, DIM), k.view(rows, KV_HEADS, DIM), v.view(rows, KV_HEADS, DIM)
    positions = torch.randint(0, 2048, (rows,))
    inv = 1.0 / (10000.0 ** (torch.arange(0, DIM, 2, dtype=torch.float64) / DIM)).float()
    freqs = torch.outer(torch.arange(2048, dtype=torch.float32), inv)
    cos_sin = torch.cat((freqs.cos(), freqs.sin()), -1)
    gate_up, act = torch.randn(rows, 2 * INTER).to(dtype), torch.empty(rows, INTER, dtype=dtype)
    blocks = rows // 16 + 64
    caches = [torch.zeros(KV_HEADS, blocks, 16, DIM, dtype=dtype).permute(1, 2, 0, 3)] * 2
    slots = torch.randperm(blocks * 16)[:rows]
    return {
        "rms_norm": (
            lambda: reference.rms_norm(out, x, w, 1e-5),
            lambda: ops.rms_norm(out, x, w, 1e-5),
        ),
        "fused_add_rms_norm": (
            lambda: reference.fused_add_rms_norm(x, res, w, 1e-5),
            lambda: ops.fused_add_rms_norm(x, res, w, 1e-5),
        ),
        "rotary_embedding (q and k)": (
            lambda: reference.rotary_embedding(positions, q, k, cos_sin),
            lambda: ops.rotary_embedding(positions, q, k, cos_sin),
        ),
        "silu_and_mul": (
            lambda: reference.silu_and_mul(act, gate_up),
            lambda: ops.silu_and_mul(act, gate_up),
        ),
        "write_kv": (
            lambda: reference.write_kv(k, v, *caches, slots),
            lambda: ops.write_kv(k, v, *caches, slots),
        ),
    }


def op_rows(ops) -> list[list]:
    out = []
    for dtype in (torch.float32, torch.bfloat16):
        for rows in (64, 1024):
            for name, (ref, fused) in op_cases(rows, dtype, ops).items():
                reps = 200 if rows == 64 else 50
                a, b = median_us(ref, reps), median_us(fused, reps)
                label = str(dtype).removeprefix("torch.")
                out.append([name, label, rows, a, b, f"{a / b:.2f}x"])
    logits = torch.randn(64, VOCAB)
    per_row = median_us(lambda: [int(r.argmax()) for r in logits], 50)
    batched = median_us(lambda: argmax_rows(logits), 50)
    label = "greedy sampling: per-row torch argmax vs batched numpy argmax"
    out.append([label, "float32", 64, per_row, batched, f"{per_row / batched:.2f}x"])
    return out


def decode_batch(dtype: str, batch: int, prompt_len: int):
    """An engine on the embedded model with ``batch`` sequences prefilled, and its next (decode)
    scheduled batch."""
    llm = LLM(
        str(default_model_path()), dtype=dtype, max_num_seqs=batch, enable_prefix_caching=False
    )
    eng = llm.engine
    gen = torch.Generator().manual_seed(0)
    for i in range(batch):
        prompt = torch.randint(100, 40000, (prompt_len,), generator=gen).tolist()
        eng.add_request(
            f"r{i}", prompt, SamplingParams(temperature=0, max_tokens=512, ignore_eos=True)
        )
    for _ in range(200):
        sched = eng.scheduler.schedule()
        if len(sched.scheduled) == batch and all(s.num_new_tokens == 1 for s in sched.scheduled):
            return eng, sched
        eng._run(sched)
    raise RuntimeError("the batch never reached a pure decode step")


def step_rows(args) -> list[list]:
    eng, sched = decode_batch(args.dtype, args.batch, args.prompt_len)
    runner = eng.runner
    fused = runner.ops
    twins = with_layer_op_twins(fused)
    variants = {"reference twins": twins, "fused C ops": fused}
    steps: dict[str, list[list[float]]] = {name: [] for name in variants}  # per round
    loads = []
    for ops in (*variants.values(), *variants.values()):  # warm-up
        runner.ops = ops
        runner.execute(sched)
    for r in range(args.rounds):
        loads.append(os.getloadavg()[0])
        for name in variants:
            steps[name].append([])
        for _ in range(args.steps):  # A B A B, step by step: drift hits both alike
            for name, ops in variants.items():
                runner.ops = ops
                t = time.perf_counter()
                runner.execute(sched)
                steps[name][-1].append(1000 * (time.perf_counter() - t))
        print(
            f"round {r}: "
            + ", ".join(f"{n} {median(steps[n][-1]):.2f} ms" for n in variants)
            + f" (load {loads[-1]:.2f})",
            flush=True,
        )
    runner.ops = fused
    flat = {n: [ms for rnd in rs for ms in rnd] for n, rs in steps.items()}
    pairs = [a / b for a, b in zip(flat["reference twins"], flat["fused C ops"], strict=True)]
    load_text = " / ".join(f"{x:.1f}" for x in loads)
    return [
        [
            name,
            " / ".join(f"{median(rnd):.2f}" for rnd in rs),
            median(flat[name]),
            "1.000x" if name == "reference twins" else f"{median(pairs):.3f}x",
            load_text,
        ]
        for name, rs in steps.items()
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--dtype", default="float32", help="the engine's dtype for the step timing")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=5, help="rounds of A B step pairs")
    ap.add_argument("--steps", type=int, default=10, help="A B step pairs per round")
    ap.add_argument("--skip-ops", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    ops = get_kernels("cpu")
    assert ops.name == "cpu", "the C kernels did not build"
    if not args.skip_ops:
        print(f"\nLayer ops, {args.threads} threads (µs, median)\n")
        headers = ["op", "dtype", "rows", "reference twin", "C", "speed-up"]
        print(table(headers, op_rows(ops)), flush=True)
    print(f"\nDecode step, {args.batch} rows, {args.dtype}, {args.threads} threads\n")
    rows = step_rows(args)
    headers = ["layer ops", "ms/step per round", "median", "paired speed-up", "load per round"]
    print(table(headers, rows))


if __name__ == "__main__":
    main()
