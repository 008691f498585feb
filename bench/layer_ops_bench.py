"""The C layer ops (``kernels/csrc/layer_ops.c``) against their torch twins (``reference``), per op
and per decode step of the engine.

    python bench/layer_ops_bench.py [--threads 1] [--dtype float32] [--rounds 5] [--steps 10]

1. Per op, median microseconds, SmolLM2-135M's shapes (hidden 576, 9 q / 3 kv heads of 64, MLP
   1536) at decode (64 rows) and prefill (1024 rows), float32 and bfloat16; and greedy sampling of
   64 rows over the 49,152-token vocabulary (a torch argmax per row vs the sampler's one batched
   numpy argmax).
2. One decode step of the embedded model (64 sequences, 128-token prompts, prefilled first):
   ``ModelRunner.execute`` on the same scheduled batch with the CPU kernel set as it is (fused)
   and with its layer ops swapped for the twins (reference), alternated A B A B, ``--steps`` steps
   per run, the median step of each run and the 1-minute load before it.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Callable

import torch
from common import median, median_seconds, table

from stencil import LLM, SamplingParams, default_model_path
from stencil.engine.sampler import argmax_rows
from stencil.kernels import get_kernels, reference

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
    twins = dataclasses.replace(
        fused,
        rms_norm=reference.rms_norm,
        fused_add_rms_norm=reference.fused_add_rms_norm,
        rotary_embedding=reference.rotary_embedding,
        silu_and_mul=reference.silu_and_mul,
        write_kv=reference.write_kv,
    )
    runs: dict[str, list[tuple[float, float]]] = {"reference twins": [], "fused C ops": []}
    for _ in range(args.rounds):
        for name, ops in (("reference twins", twins), ("fused C ops", fused)):
            runner.ops = ops
            load = os.getloadavg()[0]
            ms = median_us(lambda: runner.execute(sched), args.steps) / 1000  # noqa: B023
            runs[name].append((ms, load))
            print(f"{name}: {ms:.2f} ms/step (load {load:.2f})", flush=True)
    runner.ops = fused
    base = median([ms for ms, _ in runs["reference twins"]])
    return [
        [
            name,
            " / ".join(f"{ms:.2f}" for ms, _ in rs),
            median([ms for ms, _ in rs]),
            f"{base / median([ms for ms, _ in rs]):.3f}x",
            " / ".join(f"{load:.1f}" for _, load in rs),
        ]
        for name, rs in runs.items()
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--dtype", default="float32", help="the engine's dtype for the step timing")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=5, help="A B pairs of step timings")
    ap.add_argument("--steps", type=int, default=10, help="timed steps per run")
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
    headers = ["layer ops", "ms/step per run", "median", "speed-up", "load (1 min) per run"]
    print(table(headers, rows))


if __name__ == "__main__":
    main()
