"""The CPU linears, in one process, medians of repeated calls: oneDNN linear (plain and with the
weight packed once) vs ``F.linear`` (MKL) on SmolLM2-135M's decode shapes; a whole step's linears
(30 layers + lm_head, 537 MB in fp32: streamed from memory, as in the engine) through oneDNN's
packed GEMM vs the C panel GEMM, alternated, by row count. (Attention: ``attention_bench``, the
layer ops: ``layer_ops_bench``.)

    python -m bench.kernels.cpu_kernels_bench [--threads 2] [--rows 64] [--step-rows 1 8 16 32 64 1024]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
import torch.nn.functional as F

from bench.common import median_seconds, table
from stencil.kernels import cpu_linear, panel_linear

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


def step_rows(
    row_counts: list[int], dtype: torch.dtype, layers: int = 30, rounds: int = 7
) -> list[list]:
    """One step's linears, every layer's own weights, oneDNN packed vs the panel GEMM."""
    panel = panel_linear.load()
    if panel is None or dtype not in panel.dtypes:
        return []
    shapes = [(n, k) for k, n in LINEARS.values() if n != 49152] * layers + [(49152, 576)]
    dense = [torch.randn(n, k).to(dtype) for n, k in shapes]
    onednn = [cpu_linear.pack_weight(w) for w in dense]
    panels = [panel.pack(w) for w in dense]
    del dense
    params = sum(n * k for n, k in shapes)
    nbytes = params * torch.tensor([], dtype=dtype).element_size()
    out = []
    for rows in row_counts:
        xs = {k: torch.randn(rows, k).to(dtype) for k in {k for _, k in shapes}}
        runs = {
            "oneDNN packed": lambda: [cpu_linear.linear(xs[w.shape[1]], w) for w in onednn],  # noqa: B023
            "C panel GEMM": lambda: [panel(xs[w.shape[1]], w) for w in panels],  # noqa: B023
        }
        times: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(rounds):  # alternated: a noisy neighbour hits both
            for name, fn in runs.items():
                times[name].append(median_seconds(fn, 1, warmup=1))
        a, b = (sorted(t)[len(t) // 2] for t in times.values())
        out.append(
            [
                str(dtype).removeprefix("torch."),
                rows,
                1000 * a,
                1000 * b,
                nbytes / b / 1e9,
                2 * rows * params / b / 1e9,
                f"{a / b:.2f}x",
            ]
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rows", type=int, default=64, help="tokens in the step (decode batch)")
    ap.add_argument("--step-rows", type=int, nargs="*", default=[1, 8, 16, 32, 64, 1024])
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
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
    print(f"\nA step's linears, SmolLM2 shapes x 30 layers + lm_head, {args.threads} threads\n")
    headers = ["dtype", "rows", "oneDNN packed ms", "C panel ms", "panel GB/s", "panel GFLOP/s"]
    rows = step_rows(args.step_rows, torch.float32) + step_rows(args.step_rows, torch.bfloat16)
    print(table([*headers, "speed-up"], rows))


if __name__ == "__main__":
    main()
