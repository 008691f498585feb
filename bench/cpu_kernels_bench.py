"""CPU kernels against their pure-torch references, in one process, medians of repeated calls:
oneDNN linear (plain and with the weight packed once) vs ``F.linear`` (MKL) on SmolLM2-135M's
decode shapes, and the C paged-attention
kernel vs ``reference.paged_attention`` (block gather + matmul) for decode and prefill.

    python bench/cpu_kernels_bench.py [--threads 2] [--rows 64]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
import torch.nn.functional as F
from common import median_seconds, table

from stencil.kernels import cpu_attention, cpu_linear, reference

# SmolLM2-135M: hidden 576, 9 heads / 3 kv heads of 64, MLP 1536, vocabulary 49,152
LINEARS = {
    "qkv_proj": (576, 960),
    "o_proj": (576, 576),
    "gate_up_proj": (576, 3072),
    "down_proj": (1536, 576),
    "lm_head": (576, 49152),
}


def median_ms(fn: Callable[[], object], reps: int = 15) -> float:
    return 1000 * median_seconds(fn, reps)


def linear_rows(rows: int, dtype: torch.dtype) -> list[list]:
    out = []
    for name, (k, n) in LINEARS.items():
        x, w = torch.randn(rows, k).to(dtype), torch.randn(n, k).to(dtype)
        packed = cpu_linear.pack_weight(w)
        mkl = median_ms(lambda: F.linear(x, w))  # noqa: B023
        onednn = median_ms(lambda: cpu_linear.linear(x, w))  # noqa: B023
        prepacked = median_ms(lambda: cpu_linear.linear(x, packed))  # noqa: B023
        gflop = 2 * rows * k * n / 1e9
        out.append(
            [
                f"{name} {k}x{n}",
                str(dtype).removeprefix("torch."),
                mkl,
                onednn,
                prepacked,
                gflop / prepacked * 1000,
                f"{mkl / onednn:.2f}x",
                f"{mkl / prepacked:.2f}x",
            ]
        )
    return out


ATTENTION_SHAPES = (("decode", 1, 300, 64), ("decode", 1, 1000, 16), ("prefill", 256, 256, 4))


def attention_rows(kernel, dtype: torch.dtype) -> list[list]:
    out = []
    for label, q_len, ctx, batch in ATTENTION_SHAPES:
        blocks = batch * -(-ctx // 16)
        # the runner's head-major cache
        k = torch.randn(3, blocks + 1, 16, 64).to(dtype).permute(1, 2, 0, 3)
        v = torch.randn(3, blocks + 1, 16, 64).to(dtype).permute(1, 2, 0, 3)
        tables = torch.randperm(blocks)[:blocks].view(batch, -1).int()
        cu = [i * q_len for i in range(batch + 1)]
        q = torch.randn(cu[-1], 9, 64).to(dtype)
        args = (q, k, v, tables, cu, [ctx] * batch, 0.125)
        plans: tuple[dict, dict] = ({}, {})
        ref = median_ms(lambda: reference.paged_attention(*args, plan=plans[0]))  # noqa: B023
        ours = median_ms(lambda: kernel(*args, plan=plans[1]))  # noqa: B023
        shape = f"{label}: {batch} seqs x {q_len} queries, context {ctx}"
        out.append([shape, str(dtype).removeprefix("torch."), ref, ours, f"{ref / ours:.2f}x"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rows", type=int, default=64, help="tokens in the step (decode batch)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    kernel = cpu_attention.load()
    print(f"\nLinear, {args.rows} rows, {args.threads} threads (ms, median)\n")
    rows = linear_rows(args.rows, torch.float32) + linear_rows(args.rows, torch.bfloat16)
    headers = [
        "layer",
        "dtype",
        "F.linear (MKL)",
        "oneDNN",
        "oneDNN packed",
        "packed GFLOP/s",
        "oneDNN speed-up",
        "packed speed-up",
    ]
    print(table(headers, rows))
    print(
        f"\nPaged attention per layer, SmolLM2 heads (9 q / 3 kv x 64), {args.threads} threads (ms, median)\n"
    )
    rows = attention_rows(kernel, torch.float32) + attention_rows(kernel, torch.bfloat16)
    print(table(["shape", "dtype", "reference (gather + matmul)", "C kernel", "speed-up"], rows))


if __name__ == "__main__":
    main()
