"""The cost of each extra row of the int8-activation quantized linears (``csrc/quant_linear_i8.c``)
over a whole step of the embedded default model: its 120 layer linears (30 layers x qkv 960x576,
o 576x576, gate_up 3072x576, down 576x1536, Q4_1 kept quantized as ``LLM()`` loads it) and, on a
line of its own, the tied lm_head (49152x576, Q8_0), by row count: the shapes of a speculative
verification step (k + 1 rows) and of batched decode.

    python -m bench.kernels.quant_rows_bench [--threads 2 1] [--rows 1 2 4 8 12 16 64]
        [--rounds 9] [--against GIT_REV]

Each step calls the kernel once per linear through ctypes with every buffer made beforehand (the
Python cost of a call is the ctypes call alone), every layer its own weight, so the codes come from
memory or L3 as in the engine, and one input and one output buffer per shape, reused by every layer
as the fused layer loop's scratch is (distinct buffers per layer would add ~40 MB of output writes
per step at 64 rows). ms per extra row = (t(M) - t(1)) / (M - 1). The VNNI roof: the
step's multiply-adds at one vpdpbusd (64 u8 x s8 products) per cycle per thread at the clock in
/proc/cpuinfo. ``--against REV`` builds the kernel at that git revision beside the working tree's,
runs the two alternated (A B A B ...) and checks that their outputs are equal bit for bit.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import subprocess
import tempfile
import time
from pathlib import Path

import torch

from bench.common import median, table
from stencil.kernels import cpu_quant
from stencil.kernels.quant_weight import QuantizedWeight
from stencil.paths import build_library

LAYER_LINEARS = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")


def model_weights() -> tuple[list[QuantizedWeight], QuantizedWeight]:
    """The embedded default's layer linears in forward order, and its lm_head (tied embedding)."""
    import stencil

    llm = stencil.LLM()
    model = llm.engine.runner.model
    layers = [
        mod.weight
        for name, mod in model.named_modules()
        if name.rsplit(".", 1)[-1] in LAYER_LINEARS
    ]
    head = model.embed_tokens.weight if model.tie else model.lm_head.weight
    assert all(isinstance(w, QuantizedWeight) for w in [*layers, head])
    del llm
    return layers, head


def kernel_at(rev: str) -> cpu_quant.CpuQuantLinear:
    """The int8 kernel as of git revision ``rev`` (its csrc files, built like the current one)."""
    root = Path(__file__).resolve().parents[2]
    src = Path(cpu_quant.SOURCE_I8)
    tmp = Path(tempfile.mkdtemp())
    listed = subprocess.run(
        ["git", "ls-tree", "--name-only", f"{rev}:{src.parent.relative_to(root)}"],
        capture_output=True,
        check=True,
        text=True,
        cwd=root,
    ).stdout.split()
    for name in listed:
        rel = src.parent.relative_to(root) / name
        text = subprocess.run(
            ["git", "show", f"{rev}:{rel}"], capture_output=True, check=True, text=True, cwd=root
        ).stdout
        (tmp / name).write_text(text)
    i8 = ctypes.CDLL(str(build_library(tmp / src.name, cpu_quant.FLAGS)))
    bf16 = ctypes.CDLL(str(build_library(Path(cpu_quant.SOURCE), cpu_quant.FLAGS)))
    return cpu_quant.CpuQuantLinear(bf16, i8)


def step_calls(weights, rows: int, threads: int, gen) -> tuple[list[tuple], list]:
    """One ctypes argument tuple per linear and the (x, out) buffers: one x [rows, K] (random)
    per K and one out [rows, N] per N, shared by the layers as the layer loop's scratch is."""
    xs: dict[int, torch.Tensor] = {}
    outs: dict[int, torch.Tensor] = {}
    calls, pairs = [], []
    for w in weights:
        n, k = w.scales.shape[0] * 16, w.shape[1]
        x = xs.setdefault(k, torch.randn(rows, k, generator=gen))
        out = outs.setdefault(n, torch.empty(rows, n))
        planes = None if w.planes is None else w.planes.data_ptr()
        mins = None if w.mins is None else w.mins.data_ptr()
        args = (x.data_ptr(), rows, k, n, w.bits, w.group, w.zero, w.codes.data_ptr(), planes)
        calls.append((*args, w.scales.data_ptr(), mins, None, out.data_ptr(), threads))
        pairs.append((x, out))
    return calls, pairs


def run_step(fn, calls) -> float:
    t = time.perf_counter()
    for args in calls:
        if fn(*args):
            raise MemoryError("quantized linear: no scratch memory")
    return time.perf_counter() - t


def clock_ghz() -> float:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("cpu MHz"):
            return float(line.split(":")[1]) / 1000
    return float("nan")


def measure(kernels, weights, row_counts, threads, rounds) -> list[list[float]]:
    """Median step seconds per (row count, kernel), the kernels alternated within each round."""
    out = []
    for rows in row_counts:
        fns, calls, outs = [], [], []
        for kernel in kernels:
            c, o = step_calls(weights, rows, threads, torch.Generator().manual_seed(rows))
            fns.append(kernel._i8)
            calls.append(c)
            outs.append(o)
        times: list[list[float]] = [[] for _ in kernels]
        for _ in range(3):  # warm (and the threads settled at this count)
            for i, fn in enumerate(fns):
                run_step(fn, calls[i])
        for _ in range(rounds):
            for i, fn in enumerate(fns):
                times[i].append(run_step(fn, calls[i]))
        for i in range(1, len(fns)):  # same inputs (same seed), same numerics: the last layer's
            if not all(torch.equal(a[1], b[1]) for a, b in zip(outs[0], outs[i], strict=True)):
                raise AssertionError(f"kernels disagree at {rows} rows")
        out.append([median(t) for t in times])
    return out


def report(label, weights, row_counts, threads, results, against) -> str:
    macs = sum(w.shape[0] * w.shape[1] for w in weights)
    ghz = clock_ghz()
    rows_out = []
    base = [r[0] for r in results]
    for rows, r in zip(row_counts, results, strict=True):
        ms = 1000 * r[0]
        extra = (r[0] - base[0]) / (rows - 1) * 1000 if rows > 1 and row_counts[0] == 1 else None
        roof = rows * macs / (64 * threads * ghz * 1e9)
        row = [rows, ms, "—" if extra is None else extra, rows * macs / r[0] / 1e9]
        row.append(f"{100 * roof / r[0]:.0f}%")
        if against:
            row += [1000 * r[1], f"{r[1] / r[0]:.2f}x"]
        rows_out.append(row)
    headers = ["rows", "ms/call", "ms/extra row", "GMAC/s", "of VNNI roof"]
    if against:
        headers += [f"ms at {against}", "speed-up"]
    return f"\n{label}, {threads} threads\n\n" + table(headers, rows_out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, nargs="+", default=[2, 1])
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 2, 4, 6, 8, 12, 16, 64])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--against", default=None, help="a git revision of the kernel to compare with")
    ap.add_argument("--no-head", action="store_true", help="skip the lm_head line")
    args = ap.parse_args()
    kernel = cpu_quant.load()
    if kernel is None or not kernel.int8_activations:
        raise SystemExit("no int8 (AVX512-VNNI) kernel on this machine")
    kernels = [kernel] + ([kernel_at(args.against)] if args.against else [])
    layers, head = model_weights()
    print(
        f"\nInt8 quantized linears of the embedded SmolLM2-135M Q4_1, medians of {args.rounds} "
        f"steps{', alternated with ' + args.against if args.against else ''}; "
        f"clock {clock_ghz():.2f} GHz; 1-minute load {os.getloadavg()[0]:.2f}"
    )
    cases = [("120 layer linears (Q4_1)", layers)]
    if not args.no_head:
        cases.append(("lm_head 49152x576 (Q8_0)", [head]))
    for threads in args.threads:
        torch.set_num_threads(threads)
        for label, weights in cases:
            results = measure(kernels, weights, args.rows, threads, args.rounds)
            print(report(label, weights, args.rows, threads, results, args.against))
    print(f"\n1-minute load at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
