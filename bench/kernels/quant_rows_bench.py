"""The cost of each extra row of the int8-activation quantized linears (``csrc/quant_linear_i8.c``)
over a whole step of the embedded default model: its 120 layer linears (30 layers x qkv 960x576,
o 576x576, gate_up 3072x576, down 576x1536, Q4_1 kept quantized as ``LLM()`` loads it) and, on a
line of its own, the tied lm_head (49152x576, Q8_0), by row count: the shapes of a speculative
verification step (k + 1 rows) and of batched decode.

    python -m bench.kernels.quant_rows_bench [--threads 2 1] [--rows 1 2 4 8 12 16 64]
        [--rounds 9] [--against GIT_REV] [--model embedded|qwen2.5-coder-1.5b|FILE.gguf]

``--model`` a real file (``stencil.testing.real_models``' names, or a path) instead: its layer
linears by format (a Q4_K_M file mixes Q4_K, Q5_0, Q6_K, Q8_0) and its head.

Each step calls the kernel once per linear through ctypes with every buffer made beforehand (the
Python cost of a call is the ctypes call alone), every layer its own weight, so the codes come from
memory or L3 as in the engine, and one input and one output buffer per shape, reused by every layer
as the fused layer loop's scratch is (distinct buffers per layer would add ~40 MB of output writes
per step at 64 rows). ms per extra row = (t(M) - t(1)) / (M - 1). At 1 row: the weights' bytes
per second beside the machine's read bandwidth (``real_file_bench.read_bandwidth``, measured
between the rounds at the same thread count: its median). The VNNI roof: the
step's multiply-adds at one vpdpbusd (64 u8 x s8 products) per cycle per thread at the clock in
/proc/cpuinfo (AVX2: two 32-product vpmaddubsw per cycle, the same). ``--against REV`` builds the kernel at that git revision beside the working tree's,
packs the same codes and scales with that revision's ``quant_weight.pack`` (its layout), runs the
two alternated (A B A B ...) and checks that their outputs are equal bit for bit (``--close``:
within 5% of the largest, for a revision that rounds the activations differently).
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from bench.common import median, table
from bench.engine.real_file_bench import read_bandwidth
from stencil.kernels import cpu_quant
from stencil.kernels.quant_weight import QuantizedWeight, SplitWeight
from stencil.paths import build_library

LAYER_LINEARS = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")
ROOT = Path(__file__).resolve().parents[2]


def model_weights(model_name: str) -> tuple[list[QuantizedWeight], QuantizedWeight]:
    """A model's layer linears in forward order (a split projection's parts one by one), and its
    head: the embedded default, a real file's name, or a GGUF path."""
    import stencil
    from stencil.testing.real_models import REAL_MODELS, real_model_path

    if model_name == "embedded":
        llm = stencil.LLM()
    else:
        path = real_model_path(model_name) if model_name in REAL_MODELS else Path(model_name)
        llm = stencil.LLM(str(path), max_model_len=256, kv_cache_memory=64 << 20)
    model = llm.engine.runner.model
    layers = []
    for name, mod in model.named_modules():
        if name.rsplit(".", 1)[-1] in LAYER_LINEARS:
            w = mod.weight
            layers += list(w.parts) if isinstance(w, SplitWeight) else [w]
    head = model.embed_tokens.weight if model.tie else model.lm_head.weight
    assert all(isinstance(w, QuantizedWeight) for w in [*layers, head])
    del llm
    return layers, head


def files_at(rev: str, folder: Path, names: list[str] | None = None) -> Path:
    """``folder``'s files (or ``names`` of them) as of git revision ``rev``, in a new directory."""
    tmp = Path(tempfile.mkdtemp())
    rel = folder.relative_to(ROOT)
    if names is None:
        names = subprocess.run(
            ["git", "ls-tree", "--name-only", f"{rev}:{rel}"],
            capture_output=True,
            check=True,
            text=True,
            cwd=ROOT,
        ).stdout.split()
    for name in names:
        text = subprocess.run(
            ["git", "show", f"{rev}:{rel / name}"],
            capture_output=True,
            check=True,
            text=True,
            cwd=ROOT,
        ).stdout
        (tmp / name).write_text(text)
    return tmp


def kernel_at(rev: str, source: Path) -> cpu_quant.CpuQuantLinear:
    """The int8 kernel ``source`` (the VNNI or the AVX2 one) as of git revision ``rev`` (its csrc
    files, built like the current one)."""
    i8 = ctypes.CDLL(
        str(build_library(files_at(rev, source.parent) / source.name, cpu_quant.FLAGS))
    )
    return cpu_quant.CpuQuantLinear(None, i8, source)


def packed_at(rev: str, weights: list[QuantizedWeight]) -> list:
    """``weights`` packed by ``quant_weight.pack`` as of ``rev``: the same codes and scales in
    that revision's layout."""
    import stencil.kernels.quant_weight as current

    folder = files_at(rev, Path(current.__file__).parent, ["quant_weight.py"])
    spec = importlib.util.spec_from_file_location("quant_weight_at_rev", folder / "quant_weight.py")
    old = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # dataclasses look it up
    spec.loader.exec_module(old)

    def strips(t, sup, w):  # [S, K/G, 16] -> [N, K/G], times the super-block scales
        if t is None:
            return None
        t = t.float() * (1 if sup is None else sup.float().repeat_interleave(256 // w.group, 1))
        return t.permute(0, 2, 1).reshape(-1, t.shape[1])[: w.shape[0]].numpy()

    out = []
    for w in weights:
        n = w.shape[0]
        codes = w.codes_of(torch.arange(n)).numpy().astype(np.int8 if w.bits == 8 else np.uint8)
        scales, mins = strips(w.scales, w.super_scales, w), strips(w.mins, w.super_mins, w)
        supers = ()  # where that revision keeps super-block scales, these
        if hasattr(old, "SUPER") and w.super_scales is not None:
            supers = (strips(w.super_scales, None, w), strips(w.super_mins, None, w))
        out.append(old.pack(codes, scales, mins, w.bits, w.group, w.zero, *supers))
    return out


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
        tensors = (w.codes, w.planes, w.scales, w.mins)  # and super-block scales where kept
        tensors += (w.super_scales, w.super_mins) if hasattr(w, "super_scales") else ()
        ptrs = [None if t is None else t.data_ptr() for t in tensors]
        calls.append(
            (
                x.data_ptr(),
                rows,
                k,
                n,
                w.bits,
                w.group,
                w.zero,
                *ptrs,
                None,
                out.data_ptr(),
                threads,
            )
        )
        pairs.append((x, out))
    return calls, pairs


def layout(weights) -> list[bool]:
    """Which weights keep super-block scales (a revision before them: none)."""
    return [getattr(w, "super_scales", None) is not None for w in weights]


def close(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Within 5% of the largest output (two roundings of random activations to int8 differ by
    ~1% of the outputs' spread per value)."""
    return float((a - b).abs().max()) <= 5e-2 * float(a.abs().max())


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


def measure(
    kernels, weight_sets, row_counts, threads, rounds, exact=True
) -> tuple[list[list[float]], float]:
    """Median step seconds per (row count, kernel), the kernels alternated within each round;
    ``weight_sets``: each kernel's weights (the same codes in its layout). And the median of the
    machine's read bandwidth (GB/s, ``read_bandwidth``) measured between the 1-row rounds."""
    out, bandwidth = [], []
    for rows in row_counts:
        fns, calls, outs = [], [], []
        for kernel, weights in zip(kernels, weight_sets, strict=True):
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
            if rows == 1:
                bandwidth.append(read_bandwidth(threads))
        for i in range(1, len(fns)):  # same inputs (same seed), same numerics: the last layer's
            # (a revision that kept K-quant scales as fp16 products: their rounding apart)
            same = (
                torch.equal if exact and layout(weight_sets[0]) == layout(weight_sets[i]) else close
            )
            if not all(same(a[1], b[1]) for a, b in zip(outs[0], outs[i], strict=True)):
                raise AssertionError(f"kernels disagree at {rows} rows")
        out.append([median(t) for t in times])
    return out, median(bandwidth)


def report(label, weights, row_counts, threads, results, bandwidth, against) -> str:
    macs = sum(w.shape[0] * w.shape[1] for w in weights)
    nbytes = sum(w.nbytes for w in weights)
    ghz = clock_ghz()
    rows_out = []
    base = [r[0] for r in results]
    for rows, r in zip(row_counts, results, strict=True):
        ms = 1000 * r[0]
        extra = (r[0] - base[0]) / (rows - 1) * 1000 if rows > 1 and row_counts[0] == 1 else None
        roof = rows * macs / (64 * threads * ghz * 1e9)
        row = [rows, ms, "—" if extra is None else extra, rows * macs / r[0] / 1e9]
        row.append(f"{100 * roof / r[0]:.0f}%")
        gbs = nbytes / r[0] / 1e9
        row.append(
            f"{gbs:.1f} of {bandwidth:.1f} ({100 * gbs / bandwidth:.0f}%)" if rows == 1 else "—"
        )
        if against:
            row += [1000 * r[1], f"{r[1] / r[0]:.2f}x"]
        rows_out.append(row)
    headers = ["rows", "ms/call", "ms/extra row", "GMAC/s", "of VNNI roof", "weight GB/s of read"]
    if against:
        headers += [f"ms at {against}", "speed-up"]
    return f"\n{label}, {threads} threads\n\n" + table(headers, rows_out)


def fmt(w: QuantizedWeight) -> str:
    return f"{w.bits}-bit, group {w.group}{', mins' if w.mins is not None else ''}"


def cases(layers, head, with_head: bool) -> list[tuple[str, list[QuantizedWeight]]]:
    """All layer linears, each format's alone where the model mixes them, and the head."""
    out = [(f"{len(layers)} layer linears", layers)]
    formats = sorted({fmt(w) for w in layers})
    if len(formats) > 1:
        for f in formats:
            ws = [w for w in layers if fmt(w) == f]
            out.append((f"{len(ws)} layer linears of {f}", ws))
    if with_head:
        out.append((f"head {head.shape[0]}x{head.shape[1]} ({fmt(head)})", [head]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, nargs="+", default=[2, 1])
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 2, 4, 6, 8, 12, 16, 64])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--against", default=None, help="a git revision of the kernel to compare with")
    ap.add_argument("--model", default="embedded", help="embedded, a real model's name, a GGUF")
    ap.add_argument(
        "--close", action="store_true", help="--against: outputs within 5%%, not bit for bit"
    )
    ap.add_argument("--no-head", action="store_true", help="skip the lm_head line")
    args = ap.parse_args()
    kernel = cpu_quant.load()
    if kernel is None or not kernel.int8_activations:
        raise SystemExit("no int8 (AVX512-VNNI or AVX2) kernel on this machine")
    kernels = [kernel] + ([kernel_at(args.against, kernel.i8_source)] if args.against else [])
    layers, head = model_weights(args.model)
    print(
        f"\nInt8 quantized linears of {args.model} ({kernel.i8_source.name}), medians of "
        f"{args.rounds} "
        f"steps{', alternated with ' + args.against if args.against else ''}; "
        f"clock {clock_ghz():.2f} GHz; 1-minute load {os.getloadavg()[0]:.2f}"
    )
    plan = [
        (label, [ws] + ([packed_at(args.against, ws)] if args.against else []))
        for label, ws in cases(layers, head, not args.no_head)
    ]
    for threads in args.threads:
        torch.set_num_threads(threads)
        for label, sets in plan:
            weights = sets[0]
            results, bandwidth = measure(
                kernels, sets, args.rows, threads, args.rounds, not args.close
            )
            print(report(label, weights, args.rows, threads, results, bandwidth, args.against))
    print(f"\n1-minute load at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
