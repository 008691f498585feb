"""Single-stream decode beside llama.cpp: one request at a time, 256 greedy tokens (EOS ignored),
Stencil in this process and ``llama-server -np 1`` on the same GGUF file, both with the same
threads, both warmed on a prompt outside the workload, prefix caching on in both (llama.cpp's
``cache_prompt``), runs alternated (Stencil, llama.cpp, Stencil, ...), medians.

Models: ``q4_1`` the embedded SmolLM2-135M Q4_1 file kept quantized; ``default`` the embedded
model as ``LLM()`` loads it (beside llama.cpp on the same Q4_1 file); ``fp32`` the same file
dequantized (``quantization="none"``); ``qwen-q8_0`` a random-weight Qwen2.5-0.5B-shaped Q8_0 file
(``quant_bench.qwen_file``, written into the cache on first use).

    python -m bench.engine.single_stream_bench [--models q4_1 default qwen-q8_0] [--rounds 3]
        [--threads 2] [--max-tokens 256] [--prompts 2]

Each run times ``--prompts`` chat prompts one after the other (the client's wall time per request,
prefill of the ~30-token prompt included); tok/s = output tokens / seconds. ``$LLAMA_SERVER``
names the llama.cpp binary (``--llama-extra`` its extra flags, ``--no-repack`` by default)."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import httpx

import bench.peers.llama_server as llama_server
from bench.common import median, table
from stencil import LLM, SamplingParams, default_model_path
from stencil.engine.models.default_model import _fetch_gguf
from stencil.paths import cache_root

PROMPTS = [
    "Tell me about the history of the bicycle.",
    "How do I make a good cup of tea?",
    "Why is the sky blue? Explain it simply.",
    "Give me some tips for learning a new language.",
]
OUTSIDE = "Describe a quiet morning in a small harbour town."
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


def stencil_run(llm: LLM, prompts: list[list[int]], max_tokens: int) -> float:
    sp = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
    tokens, seconds = 0, 0.0
    for ids in prompts:
        t = time.perf_counter()
        out = llm.generate([ids], sp, use_tqdm=False)
        seconds += time.perf_counter() - t
        tokens += len(out[0].outputs[0].token_ids)
    return tokens / seconds


def llama_run(url: str, prompts: list[list[int]], max_tokens: int) -> float:
    tokens, seconds = 0, 0.0
    with httpx.Client(timeout=600) as http:
        for ids in prompts:
            body = {"prompt": ids, "n_predict": max_tokens, "temperature": 0, "ignore_eos": True,
                    "seed": 0, "cache_prompt": True}  # fmt: skip
            t = time.perf_counter()
            r = http.post(url, json=body)
            seconds += time.perf_counter() - t
            r.raise_for_status()
            tokens += int(r.json()["tokens_predicted"])
    return tokens / seconds


def bench_model(name: str, args, tok) -> list:
    kwargs, file = MODELS[name]
    path = gguf_file(file or "smollm2")
    model = str(path) if file is not None else None
    llm = LLM(model, num_threads=args.threads, max_model_len=2048, kv_cache_memory=256 << 20,
              **kwargs)  # fmt: skip
    prompts = [prompt_ids(tok, p) for p in (PROMPTS * 4)[: args.prompts]]
    warm = [prompt_ids(tok, OUTSIDE)]
    stencil_run(llm, warm, 32)
    runs: dict[str, list[float]] = {"stencil": [], "llama": []}
    loads: list[float] = []
    server = None
    if llama_server.available() and not args.no_llama_cpp:
        server = llama_server.start(path, args.threads, slots=1, ctx_per_slot=2048,
                                    extra=tuple(args.llama_extra.split()))  # fmt: skip
    try:
        url = server.url("/completion") if server else ""
        if server:
            llama_run(url, warm, 32)
        for _ in range(args.rounds):
            runs["stencil"].append(stencil_run(llm, prompts, args.max_tokens))
            loads.append(os.getloadavg()[0])
            if server:
                runs["llama"].append(llama_run(url, prompts, args.max_tokens))
                loads.append(os.getloadavg()[0])
            print(name, {k: [f"{x:.1f}" for x in v] for k, v in runs.items()}, flush=True)
    finally:
        if server:
            server.stop()
    s, ll = median(runs["stencil"]), median(runs["llama"])
    label = {"q4_1": "SmolLM2-135M Q4_1, kept quantized", "fp32": "SmolLM2-135M Q4_1, fp32",
             "default": "SmolLM2-135M, as LLM() loads it", "qwen-q8_0":
             "Qwen2.5-0.5B shape Q8_0, kept quantized"}[name]  # fmt: skip
    return [label, " / ".join(f"{x:.1f}" for x in runs["stencil"]),
            " / ".join(f"{x:.1f}" for x in runs["llama"]) or "-", f"{s:.1f}",
            f"{ll:.1f}" if runs["llama"] else "-",
            f"**{s / ll:.2f}x**" if runs["llama"] else "-",
            f"{min(loads):.1f}-{max(loads):.1f}"]  # fmt: skip


def main() -> None:
    from transformers import AutoTokenizer

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=["q4_1", "default", "qwen-q8_0"],
                    choices=list(MODELS))  # fmt: skip
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--prompts", type=int, default=2, help="requests per run, one at a time")
    ap.add_argument("--llama-extra", default="--no-repack", help="extra llama-server flags")
    ap.add_argument("--no-llama-cpp", action="store_true")
    args = ap.parse_args()
    tok = AutoTokenizer.from_pretrained(str(default_model_path()))
    rows = [bench_model(name, args, tok) for name in args.models]
    print(f"\n{args.threads} threads, {args.prompts} requests x {args.max_tokens} greedy tokens "
          f"one at a time per run, {args.rounds} rounds alternated, medians\n")  # fmt: skip
    heads = ["model", "Stencil tok/s per run", "llama.cpp -np 1 tok/s per run", "Stencil",
             "llama.cpp", "Stencil / llama.cpp", "load (1 min)"]  # fmt: skip
    print(table(heads, rows))


if __name__ == "__main__":
    main()
