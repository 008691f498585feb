"""Single-stream decode beside llama.cpp: one request at a time, 256 greedy tokens (EOS ignored),
Stencil in this process and ``llama-server -np 1`` on the same GGUF file, both with the same
threads, both warmed on a prompt outside the workload, prefix caching on in both (llama.cpp's
``cache_prompt``), runs alternated (Stencil, llama.cpp, Stencil, ...) by ``bench.common.compare``,
medians with the machine's load.

Models: ``q4_1`` the embedded SmolLM2-135M Q4_1 file kept quantized; ``default`` the embedded
model as ``LLM()`` loads it (beside llama.cpp on the same Q4_1 file); ``fp32`` the same file
dequantized (``quantization="none"``); ``qwen-q8_0`` a random-weight Qwen2.5-0.5B-shaped Q8_0 file
(``quant_bench.qwen_file``, written into the cache on first use).

    python -m bench.engine.single_stream_bench [--models q4_1 default qwen-q8_0] [--rounds 3]
        [--threads 2] [--max-tokens 256] [--prompts 2] [--workload chat|extract|extract-free]
        [--speculative K [--lookup-n N]]

``chat``: each run times ``--prompts`` chat prompts one after the other (the client's wall time
per request, prefill of the ~30-token prompt included), EOS ignored; tok/s = output tokens /
seconds. ``extract``: the 7 ``examples/`` documents with their library schemas as the JSON schema
of both engines (llama.cpp's ``json_schema``; not grounded, which llama.cpp has no counterpart
for), EOS honoured; ``extract-free`` the same prompts without a schema (copying the document is
what prompt lookup drafts). ``--speculative K``: prompt-lookup speculation with the same settings on both,
K drafts from an N-token lookup: Stencil's ``{"method": "ngram", "num_speculative_tokens": K,
"prompt_lookup_max": N, "prompt_lookup_min": N}`` and llama.cpp's ``--spec-type ngram-simple
--spec-ngram-simple-size-n N --spec-ngram-simple-size-m K --spec-draft-n-max K``.
``$LLAMA_SERVER`` names the llama.cpp binary (``--llama-extra`` its extra flags, ``--no-repack``
by default) and inherits this process's environment: an ``OMP_WAIT_POLICY`` or
``GOMP_SPINCOUNT`` applies to both engines (docs/engine.md § Threads)."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import httpx

import bench.peers.llama_server as llama_server
from bench.common import MIN_ROUNDS, compare, median, results, summary, table
from stencil import LLM, SamplingParams, default_model_path
from stencil.constraints import Constraint
from stencil.engine.models.default_model import _fetch_gguf
from stencil.paths import cache_root

PROMPTS = [
    "Tell me about the history of the bicycle.",
    "How do I make a good cup of tea?",
    "Why is the sky blue? Explain it simply.",
    "Give me some tips for learning a new language.",
]
OUTSIDE = "Describe a quiet morning in a small harbour town."
ROOT = Path(__file__).resolve().parents[2]
DOCS = ["invoice", "contact", "person", "receipt", "purchase_order", "event", "support_ticket"]
MODELS = {  # name -> (LLM kwargs, which file llama.cpp and Stencil read)
    "q4_1": ({}, "smollm2"),
    "default": ({}, None),
    "fp32": ({"quantization": "none"}, "smollm2"),
    "qwen-q8_0": ({}, "qwen-q8_0"),
}


def gguf_file(name: str) -> Path:
    if name == "qwen-q8_0":
        from bench.engine.quant_bench import qwen_file

        return qwen_file("q8_0")
    return _fetch_gguf(cache_root() / "downloads")


def prompt_ids(tok, text: str) -> list[int]:
    chat = [{"role": "user", "content": text}]
    return tok(tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)).input_ids


@dataclass
class Request:
    ids: list[int]
    schema: dict | None  # None: free text
    max_tokens: int
    ignore_eos: bool = False


def chat_requests(tok, n: int, max_tokens: int) -> list[Request]:
    return [Request(prompt_ids(tok, p), None, max_tokens, True) for p in (PROMPTS * 4)[:n]]


def plain_schema(node):
    """The schema without Stencil's ``x-grounded`` marks (the same constraint for both engines)."""
    if isinstance(node, dict):
        return {k: plain_schema(v) for k, v in node.items() if k != "x-grounded"}
    if isinstance(node, list):
        return [plain_schema(v) for v in node]
    return node


def extract_requests(tok, max_tokens: int, with_schema: bool) -> list[Request]:
    out = []
    for name in DOCS:
        doc = next((ROOT / "examples").glob(f"{name}.*")).read_text()
        schema = plain_schema(
            json.loads((ROOT / "stencil/extract/schemas" / f"{name}.json").read_text())
        )
        ask = f"Extract the {name.replace('_', ' ')} as JSON.\n\nDocument:\n{doc}"
        out.append(Request(prompt_ids(tok, ask), schema if with_schema else None, max_tokens))
    return out


def stencil_run(llm: LLM, reqs: list[Request]) -> float:
    tokens, seconds = 0, 0.0
    for r in reqs:
        c = None if r.schema is None else Constraint.json_schema(r.schema, whitespace="compact")
        sp = SamplingParams(
            temperature=0, max_tokens=r.max_tokens, ignore_eos=r.ignore_eos, constraint=c
        )
        t = time.perf_counter()
        out = llm.generate([r.ids], sp, use_tqdm=False)
        seconds += time.perf_counter() - t
        tokens += len(out[0].outputs[0].token_ids)
    return tokens / seconds


def llama_run(url: str, reqs: list[Request]) -> float:
    tokens, seconds = 0, 0.0
    with httpx.Client(timeout=600) as http:
        for req in reqs:
            body = {
                "prompt": req.ids,
                "n_predict": req.max_tokens,
                "temperature": 0,
                "ignore_eos": req.ignore_eos,
                "seed": 0,
                "cache_prompt": True,
            }
            if req.schema is not None:
                body["json_schema"] = req.schema
            t = time.perf_counter()
            r = http.post(url, json=body)
            seconds += time.perf_counter() - t
            r.raise_for_status()
            tokens += int(r.json()["tokens_predicted"])
    return tokens / seconds


def speculation(args) -> tuple[dict, tuple]:
    """The same prompt-lookup settings for Stencil (its config) and llama.cpp (its flags)."""
    if not args.speculative:
        return {}, ()
    k, n = args.speculative, args.lookup_n
    spec = {
        "method": "ngram",
        "num_speculative_tokens": k,
        "prompt_lookup_max": n,
        "prompt_lookup_min": n,
    }
    flags = (
        "--spec-type",
        "ngram-simple",
        "--spec-ngram-simple-size-n",
        str(n),
        "--spec-ngram-simple-size-m",
        str(k),
        "--spec-draft-n-max",
        str(k),
    )
    return {"speculative_config": spec}, flags


def bench_model(name: str, args, tok) -> list:
    kwargs, file = MODELS[name]
    path = gguf_file(file or "smollm2")
    model = str(path) if file is not None else None
    spec, spec_flags = speculation(args)
    llm = LLM(
        model,
        num_threads=args.threads,
        max_model_len=2048,
        kv_cache_memory=256 << 20,
        **kwargs,
        **spec,
    )
    if args.workload == "chat":
        prompts = chat_requests(tok, args.prompts, args.max_tokens)
    else:
        prompts = extract_requests(tok, args.max_tokens, args.workload == "extract")
    warm = [Request(prompt_ids(tok, OUTSIDE), None, 32)]
    engines = {"stencil": partial(stencil_run, llm)}
    server = None
    if llama_server.available() and not args.no_llama_cpp:
        server = llama_server.start(
            path,
            args.threads,
            slots=1,
            ctx_per_slot=2048,
            extra=(*args.llama_extra.split(), *spec_flags),
        )
        engines["llama"] = partial(llama_run, server.url("/completion"))
    try:
        timed = compare(
            {k: partial(go, prompts) for k, go in engines.items()},
            args.rounds,
            warm={k: partial(go, warm) for k, go in engines.items()},
        )
    finally:
        if server:
            server.stop()
    runs = {k: results(timed.get(k, [])) for k in ("stencil", "llama")}
    loads = [r.load for got in timed.values() for r in got]
    print(f"{name}: {summary(timed, args.rounds)}", flush=True)
    s, ll = median(runs["stencil"]), median(runs["llama"])
    label = {
        "q4_1": "SmolLM2-135M Q4_1, kept quantized",
        "fp32": "SmolLM2-135M Q4_1, fp32",
        "default": "SmolLM2-135M, as LLM() loads it",
        "qwen-q8_0": "Qwen2.5-0.5B shape Q8_0, kept quantized",
    }[name]
    return [
        label,
        " / ".join(f"{x:.1f}" for x in runs["stencil"]),
        " / ".join(f"{x:.1f}" for x in runs["llama"]) or "-",
        f"{s:.1f}",
        f"{ll:.1f}" if runs["llama"] else "-",
        f"**{s / ll:.2f}x**" if runs["llama"] else "-",
        f"{min(loads):.1f}-{max(loads):.1f}",
    ]


def main() -> None:
    from transformers import AutoTokenizer

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--models", nargs="+", default=["q4_1", "default", "qwen-q8_0"], choices=list(MODELS)
    )
    ap.add_argument("--rounds", type=int, default=MIN_ROUNDS)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--prompts", type=int, default=2, help="requests per run, one at a time")
    ap.add_argument("--llama-extra", default="--no-repack", help="extra llama-server flags")
    ap.add_argument("--no-llama-cpp", action="store_true")
    ap.add_argument("--workload", choices=["chat", "extract", "extract-free"], default="chat")
    ap.add_argument(
        "--speculative",
        type=int,
        default=0,
        metavar="K",
        help="prompt-lookup speculation with K drafts on both engines",
    )
    ap.add_argument("--lookup-n", type=int, default=3, help="lookup n-gram length")
    args = ap.parse_args()
    tok = AutoTokenizer.from_pretrained(str(default_model_path()))
    rows = [bench_model(name, args, tok) for name in args.models]
    what = (
        f"{args.prompts} chat requests x {args.max_tokens} greedy tokens"
        if args.workload == "chat"
        else f"{len(DOCS)} {args.workload} requests (<= {args.max_tokens} tokens, EOS honoured)"
    )
    spec = f", prompt lookup k={args.speculative} n={args.lookup_n}" if args.speculative else ""
    print(
        f"\n{args.threads} threads, {what} one at a time per run{spec}, {args.rounds} rounds "
        "alternated, medians\n"
    )
    heads = [
        "model",
        "Stencil tok/s per run",
        "llama.cpp -np 1 tok/s per run",
        "Stencil",
        "llama.cpp",
        "Stencil / llama.cpp",
        "load (1 min)",
    ]
    print(table(heads, rows))


if __name__ == "__main__":
    main()
