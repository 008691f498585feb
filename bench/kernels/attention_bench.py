"""The C paged-attention kernel over a whole step's layers, against an older version of itself or
against the pure-torch path.

    python -m bench.kernels.attention_bench [--against GIT_REV|torch] [--threads 2] [--rounds 15]
        [--only batch|single]

Each case runs the kernel once per layer over that layer's own cache (SmolLM2-135M: 30 layers, 9
query / 3 kv heads of 64), so a decode step's keys and values come from memory as in the engine,
not from a cache warmed by the previous call. Block tables are a random permutation (blocks
scattered as decode allocates them). With ``--against``, the kernel source at that revision is
built beside the working tree's and the two run alternated (A B A B ...), medians reported with
their ratio; ``--against torch`` alternates with ``reference.paged_attention`` (block gather +
matmul, what runs without a C compiler). The memory read roof beside it: ``torch.sum`` over 1 GiB on the same threads.

A second table, one sequence (one request at a time): a decode step (1 query row) and the
verification steps of speculative decoding (k + 1 rows: 2, 6, 11) at contexts 300 and 900, fp32,
on 2 threads and on 1.
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
from functools import partial
from pathlib import Path

import torch

from bench.common import alternate, median, table
from stencil.kernels import cpu_attention, reference
from stencil.paths import build_library

LAYERS, HEADS, KV_HEADS, DIM, BLOCK = 30, 9, 3, 64, 16
# (label, context lengths, new tokens per sequence)
CASES = (
    ("decode, 64 seqs, context 40-500", "decode", 64),
    ("prefill, 4 x 256 tokens", "prefill", 4),
    ("prefill, 1,024 tokens at 1,024-2,048", "long", 1),
)
# one sequence: (context, query rows)
SINGLE = [(ctx, rows) for ctx in (300, 900) for rows in (1, 2, 6, 11)]


def shape(kind: str, batch: int, gen: torch.Generator) -> tuple[list[int], list[int]]:
    if kind == "decode":
        return torch.randint(40, 500, (batch,), generator=gen).tolist(), [1] * batch
    if kind == "prefill":
        return [256] * batch, [256] * batch
    return [2048], [1024]


def step_inputs(kind: str, batch: int, dtype: torch.dtype) -> tuple:
    gen = torch.Generator().manual_seed(0)
    ctxs, q_lens = shape(kind, batch, gen)
    return inputs(ctxs, q_lens, dtype, gen)


def inputs(ctxs: list[int], q_lens: list[int], dtype: torch.dtype, gen: torch.Generator) -> tuple:
    """A step's query, per-layer caches, block tables, offsets, contexts, bytes and flops."""
    blocks = [-(-c // BLOCK) for c in ctxs]
    perm = torch.randperm(sum(blocks), generator=gen)
    tables = torch.zeros(len(ctxs), max(blocks), dtype=torch.int32)
    at = 0
    for b, n in enumerate(blocks):
        tables[b, :n] = perm[at : at + n]
        at += n
    cu = [0]
    for n in q_lens:
        cu.append(cu[-1] + n)

    def cache() -> torch.Tensor:  # the runner's head-major layout
        store = torch.randn(KV_HEADS, sum(blocks), BLOCK, DIM, generator=gen).to(dtype)
        return store.permute(1, 2, 0, 3)

    caches = [(cache(), cache()) for _ in range(LAYERS)]
    q = torch.randn(cu[-1], HEADS, DIM, generator=gen).to(dtype)
    kv_bytes = sum(ctxs) * KV_HEADS * DIM * 2 * q.element_size() * LAYERS
    flop = sum(n * (c - n / 2) for n, c in zip(q_lens, ctxs, strict=True)) * HEADS * DIM * 4
    return q, caches, tables, cu, ctxs, kv_bytes, flop * LAYERS


def run_step(kernel, q, caches, tables, cu, ctxs) -> float:
    plan: dict = {}
    t = time.perf_counter()
    for k, v in caches:
        kernel(q, k, v, tables, cu, ctxs, DIM**-0.5, plan=plan)
    return time.perf_counter() - t


def kernel_at(rev: str):
    """The kernel as of git revision ``rev``: its C sources and headers and its Python wrapper (which
    plans the work units the C of that revision reads), built into the cache like the current one."""
    src = Path(cpu_attention.SOURCE)
    root = Path(__file__).resolve().parents[2]

    def show(path: Path) -> str:
        rel = path.relative_to(root)
        return subprocess.run(
            ["git", "show", f"{rev}:{rel}"], capture_output=True, check=True, text=True
        ).stdout

    tmp = Path(tempfile.mkdtemp())
    listed = subprocess.run(
        ["git", "ls-tree", "--name-only", rev, f"{src.parent.relative_to(root)}/"],
        capture_output=True,
        check=True,
        text=True,
        cwd=root,
    ).stdout.split()
    for name in [src.name] + [Path(n).name for n in listed if n.endswith(".h")]:
        (tmp / name).write_text(show(src.parent / name))
    wrapper = tmp / "cpu_attention_at_rev.py"
    wrapper.write_text(show(Path(cpu_attention.__file__)))
    spec = importlib.util.spec_from_file_location("cpu_attention_at_rev", wrapper)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    lib = ctypes.CDLL(str(build_library(tmp / src.name, module.FLAGS)))
    return module.CpuPagedAttention(lib)


def read_roof_gbs() -> float:
    x = torch.ones(256 * 1024 * 1024)
    x.sum()
    t = time.perf_counter()
    x.sum()
    return x.numel() * 4 / (time.perf_counter() - t) / 1e9


def median_ms_alternated(kernels: list, args: tuple, rounds: int) -> list[float]:
    """Median ms of each kernel over ``rounds`` steps, the kernels alternated round by round."""
    times = alternate({i: partial(run_step, k, *args) for i, k in enumerate(kernels)}, rounds)
    return [1000 * median(times[i]) for i in range(len(kernels))]


def batch_table(kernels: list, rounds: int) -> list[list]:
    rows = []
    for dtype in (torch.float32, torch.bfloat16):
        for label, kind, batch in CASES:
            q, caches, tables, cu, ctxs, kv_bytes, flop = step_inputs(kind, batch, dtype)
            ms = median_ms_alternated(kernels, (q, caches, tables, cu, ctxs), rounds)
            row = [label, str(dtype).removeprefix("torch."), ms[0]]
            row += [kv_bytes / ms[0] / 1e6, flop / ms[0] / 1e6]
            if len(ms) > 1:
                row += [ms[1], f"{ms[1] / ms[0]:.2f}x"]
            rows.append(row)
    return rows


def single_table(kernels: list, rounds: int, threads: list[int]) -> list[list]:
    """One sequence, fp32: per (context, rows) the ms on each thread count (and the ratio)."""
    rows = []
    for ctx, n in SINGLE:
        args = inputs([ctx], [n], torch.float32, torch.Generator().manual_seed(0))[:5]
        row: list = [ctx, n]
        for t in threads:
            torch.set_num_threads(t)
            ms = median_ms_alternated(kernels, args, rounds)
            row += [ms[0]] + ([ms[1], f"{ms[1] / ms[0]:.2f}x"] if len(ms) > 1 else [])
        rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--against",
        default=None,
        help="a git revision of the kernel, or 'torch' (reference.paged_attention), to compare with",
    )
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--only", choices=["batch", "single"], default=None, help="one table only")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    current = cpu_attention.load()
    old = None
    if args.against == "torch":
        old = reference.paged_attention  # block gather + matmul, the pure-torch path
    elif args.against:
        old = kernel_at(args.against)
    kernels = [current] + ([old] if old else [])
    vs = f"at {args.against}"
    if args.only != "single":
        headers = ["step (30 layers)", "dtype", "ms", "KV GB/s", "GFLOP/s"]
        headers += [f"ms {vs}", "speed-up"] if old else []
        print(
            f"\nPaged attention, one step over {LAYERS} layers' caches, {args.threads} threads, "
            f"medians of {args.rounds}; memory read roof {read_roof_gbs():.1f} GB/s; "
            f"1-minute load {os.getloadavg()[0]:.1f}\n"
        )
        print(table(headers, batch_table(kernels, args.rounds)))
    if args.only != "batch":
        threads = sorted({args.threads, 1}, reverse=True)
        headers = ["context", "rows"]
        for t in threads:
            headers += [f"ms, {t} thr"] + ([f"{vs}, {t} thr", "speed-up"] if old else [])
        print(
            f"\nOne sequence, fp32, one step over {LAYERS} layers' caches, medians of "
            f"{args.rounds}; 1-minute load {os.getloadavg()[0]:.1f}\n"
        )
        print(table(headers, single_table(kernels, args.rounds, threads)))
        torch.set_num_threads(args.threads)


if __name__ == "__main__":
    main()
