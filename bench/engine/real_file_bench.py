"""A real GGUF file beside llama.cpp, against the machine's memory-bandwidth limit: one request at
a time (decode), the prefill of a long prompt, and 16 requests at once, Stencil in this process and
``llama-server`` (``-np 1`` for the first two, ``-np 16`` for the third) on the same file, both
with the same threads, both warmed on a prompt outside the workload, runs alternated
(``bench.common.compare``), medians with the machine's load.

    python -m bench.engine.real_file_bench [--model qwen2.5-coder-1.5b] [--rounds 3] [--threads 2]
        [--workloads decode prefill concurrent] [--max-tokens 128] [--prefill-tokens 1000]

The bandwidth limit is measured in the same run, between rounds: the read bandwidth of this
process's threads (``torch.sum`` over 1 GiB of fp32, best of 5) divided by the bytes of weights one
decoded token reads (every tensor of the file but the token embedding, which a step looks up;
the output head is read whole, tied or not); Stencil's resident bytes are printed beside.
``decode``: chat prompts, ``--max-tokens`` greedy tokens each, EOS ignored, one request at a
time (tok/s = output tokens / the client's wall time, prefill of the ~40-token prompt included).
``prefill``: a plain-text prompt of about ``--prefill-tokens`` tokens (the ``examples/``
documents), one output token; every run's prompt starts with its own number, so no prefix cache
(Stencil's, llama.cpp's ``cache_prompt``) holds any of it. ``concurrent``: 16 chat prompts sent
at once, ``--max-tokens`` each, EOS ignored (output tok/s). ``$LLAMA_SERVER`` names the llama.cpp
binary (``--llama-extra`` its extra flags, ``--no-repack`` by default: its AMX repacking
crashes on some CPUs); without it Stencil runs alone."""

from __future__ import annotations

import argparse
import asyncio
import time
from functools import partial
from itertools import count
from pathlib import Path

import gguf
import httpx
import torch

import bench.peers.llama_server as llama_server
from bench.common import MIN_ROUNDS, compare, median, results, summary, table
from bench.engine.single_stream_bench import OUTSIDE, PROMPTS, prompt_ids
from stencil import LLM, SamplingParams
from stencil.kernels.quant_weight import QuantizedWeight
from stencil.testing.real_models import REAL_MODELS, real_model_path

ROOT = Path(__file__).resolve().parents[2]
SLOTS = {"decode": 1, "prefill": 1, "concurrent": 16}


def read_bandwidth(threads: int) -> float:
    """GB/s this process reads with ``threads`` threads: best of 5 sums over 1 GiB of fp32."""
    torch.set_num_threads(threads)
    a = torch.ones(256 << 20)
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        a.sum()
        best = min(best, time.perf_counter() - t)
    return a.numel() * 4 / best / 1e9


def file_bytes_per_token(path: Path) -> int:
    """The file's tensor bytes a decoded token reads: all but the token embedding, plus the
    embedding again where the head is tied to it."""
    tensors = {t.name: int(t.n_bytes) for t in gguf.GGUFReader(str(path)).tensors}
    embd = tensors.pop("token_embd.weight", 0)
    return sum(tensors.values()) + (0 if "output.weight" in tensors else embd)


def resident_bytes_per_token(llm: LLM) -> int:
    """Stencil's bytes of quantized weights a token reads (its linears and head)."""
    return sum(
        m.weight.nbytes
        for name, m in llm.engine.runner.model.named_modules()
        if isinstance(getattr(m, "weight", None), QuantizedWeight) and "embed" not in name
    )


def long_text(tok, tokens: int) -> str:
    """About ``tokens`` tokens of the ``examples/`` documents, repeated as needed."""
    docs = [p.read_text() for p in sorted((ROOT / "examples").glob("*.*")) if p.suffix != ".json"]
    text = ""
    while len(tok.encode(text)) < tokens:
        text += docs[len(text) % len(docs)] + "\n\n"
    ids = tok.encode(text)[:tokens]
    return tok.decode(ids)


def stencil_run(llm: LLM, prompts: list[list[int]], max_tokens: int, what: str) -> float:
    sp = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
    t = time.perf_counter()
    if what == "concurrent":
        outs = llm.generate(prompts, sp, use_tqdm=False)
    else:
        outs = [llm.generate([p], sp, use_tqdm=False)[0] for p in prompts]
    seconds = time.perf_counter() - t
    if what == "prefill":
        return sum(len(p) for p in prompts) / seconds
    return sum(len(o.outputs[0].token_ids) for o in outs) / seconds


async def _llama(url: str, prompts, max_tokens: int, at_once: bool) -> tuple[int, int, float]:
    async with httpx.AsyncClient(timeout=3600) as http:

        async def one(ids):
            body = {"prompt": ids, "n_predict": max_tokens, "temperature": 0}
            body |= {"ignore_eos": True, "seed": 0, "cache_prompt": True}
            r = await http.post(url, json=body)
            r.raise_for_status()
            got = r.json()
            return int(got["tokens_evaluated"]), int(got["tokens_predicted"])

        t = time.perf_counter()
        if at_once:
            got = await asyncio.gather(*(one(p) for p in prompts))
        else:
            got = [await one(p) for p in prompts]
        seconds = time.perf_counter() - t
    return sum(g[0] for g in got), sum(g[1] for g in got), seconds


def llama_run(url: str, prompts: list[list[int]], max_tokens: int, what: str) -> float:
    evaluated, predicted, seconds = asyncio.run(
        _llama(url, prompts, max_tokens, what == "concurrent")
    )
    return (evaluated if what == "prefill" else predicted) / seconds


def workload(what: str, tok, args, runs, text: str) -> tuple[list[list[int]], int]:
    """The prompts and output tokens of one run (prefill: ``text`` under a fresh first line
    every run)."""
    if what == "decode":
        return [prompt_ids(tok, p) for p in PROMPTS[:2]], args.max_tokens
    if what == "concurrent":
        return [prompt_ids(tok, p) for p in (PROMPTS * 4)[:16]], args.max_tokens
    return [tok.encode(f"Run {next(runs)}.\n{text}\nSummary:")], 1


def bench(what: str, llm: LLM, path: Path, tok, args, bandwidths: list[float]) -> list:
    runs = count()
    text = long_text(tok, args.prefill_tokens) if what == "prefill" else ""
    engines = {"stencil": partial(stencil_run, llm)}
    server = None
    if llama_server.available() and not args.no_llama_cpp:
        slots = SLOTS[what]
        ctx = args.prefill_tokens + 64 if what == "prefill" else 512
        server = llama_server.start(path, args.threads, slots, ctx, tuple(args.llama_extra.split()))
        engines["llama"] = partial(llama_run, server.url("/completion"))

    def go(run):
        prompts, n = workload(what, tok, args, runs, text)
        result = run(prompts, n, what)
        bandwidths.append(read_bandwidth(args.threads))
        return result

    try:
        warm = [prompt_ids(tok, OUTSIDE)]
        timed = compare(
            {k: partial(go, run) for k, run in engines.items()},
            args.rounds,
            warm={k: partial(run, warm, 8, "decode") for k, run in engines.items()},
        )
    finally:
        if server:
            server.stop()
    print(f"{what}: {summary(timed, args.rounds)}", flush=True)
    s, ll = (results(timed.get(k, [])) for k in ("stencil", "llama"))
    loads = [r.load for got in timed.values() for r in got]
    return [
        what,
        " / ".join(f"{x:.1f}" for x in s),
        " / ".join(f"{x:.1f}" for x in ll) or "-",
        f"{median(s):.1f}",
        f"{median(ll):.1f}" if ll else "-",
        f"**{median(s) / median(ll):.2f}x**" if ll else "-",
        f"{min(loads):.1f}-{max(loads):.1f}",
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen2.5-coder-1.5b", choices=sorted(REAL_MODELS))
    ap.add_argument("--rounds", type=int, default=MIN_ROUNDS)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--prefill-tokens", type=int, default=1000)
    ap.add_argument("--workloads", nargs="+", default=list(SLOTS), choices=list(SLOTS))
    ap.add_argument("--llama-extra", default="--no-repack", help="extra llama-server flags")
    ap.add_argument("--no-llama-cpp", action="store_true")
    args = ap.parse_args()
    path = real_model_path(args.model)
    llm = LLM(
        str(path),
        num_threads=args.threads,
        max_model_len=args.prefill_tokens + 512,
        kv_cache_memory=1 << 30,
    )
    tok = llm.get_tokenizer()
    bandwidths = [read_bandwidth(args.threads)]
    rows = [bench(what, llm, path, tok, args, bandwidths) for what in args.workloads]
    per_token = file_bytes_per_token(path)
    bw = median(bandwidths)
    limit = bw * 1e9 / per_token
    print(
        f"\n{args.model} ({path.name}), {args.threads} threads, {args.rounds} rounds alternated, "
        f"medians. Read bandwidth {bw:.1f} GB/s (median of {len(bandwidths)}, "
        f"{min(bandwidths):.1f}-{max(bandwidths):.1f}); the file's weights per decoded token "
        f"{per_token / 1e9:.3f} GB (Stencil resident {resident_bytes_per_token(llm) / 1e9:.3f} GB):"
        f" decode limit {limit:.1f} tok/s.\n"
    )
    heads = ["workload", "Stencil per run", "llama.cpp per run", "Stencil", "llama.cpp"]
    heads += ["Stencil / llama.cpp", "load (1 min)"]
    print(table(heads, rows))
    for row in rows:
        if row[0] == "decode":
            print(
                f"\ndecode: Stencil at {float(row[3]) / limit:.0%} of the bandwidth limit", end=""
            )
            if row[4] != "-":
                print(f", llama.cpp at {float(row[4]) / limit:.0%}", end="")
            print()


if __name__ == "__main__":
    main()
