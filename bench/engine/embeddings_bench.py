"""Embeddings benchmark: 256 inputs of 64-256 tokens through Stencil (one batched call offline,
one batched request to ``stencil serve``, 256 sequential single requests) and through
transformers one input at a time (forward + the same pooling), side by side.

    python -m bench.engine.embeddings_bench                          # default model, 256 inputs
    python -m bench.engine.embeddings_bench --hf-subset 64 --pooling mean

Prints a Markdown table of embeddings/s and tokens/s, and the largest difference between
Stencil's and transformers' vectors (the same inputs, fp32).
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
from typing import Any

import httpx

from bench.common import table
from stencil.testing.serve_process import start_serve

PARAGRAPHS = [
    "Paged attention stores the key-value cache in fixed-size blocks, so memory is allocated "
    "as sequences grow and shared between requests with a common prefix.",
    "The committee met on Tuesday to review the budget for the new library wing; after a long "
    "discussion about shelving and lighting, the proposal was approved with two amendments.",
    "Bees communicate the direction and distance of flowers through a waggle dance performed "
    "on the vertical comb, translating the angle of the sun into the angle of gravity.",
    "def merge(a, b):\n    out = []\n    while a and b:\n        out.append(a.pop(0) if a[0] < "
    "b[0] else b.pop(0))\n    return out + a + b\n",
    "Invoice 2024-117: 3 x consulting hours at 120 EUR, 1 x travel flat rate at 80 EUR; total "
    "440 EUR, payable within 30 days to the account given below.",
    "The river rose through the night and by morning the lower streets of the town were under "
    "water; volunteers carried sandbags while the ferry kept running between the two banks.",
]


def workload(tokenizer: Any, n: int, lo: int, hi: int, seed: int) -> list[list[int]]:
    """``n`` token-id inputs of ``lo``-``hi`` tokens cut from varied English, code and numbers."""
    rng = random.Random(seed)
    text = " ".join(rng.choice(PARAGRAPHS) for _ in range(400))
    ids = tokenizer(text, add_special_tokens=False).input_ids
    out = []
    for _ in range(n):
        length = rng.randint(lo, hi)
        start = rng.randrange(len(ids) - length)
        out.append(ids[start : start + length])
    return out


def server_side(args, inputs: list[list[int]]) -> tuple[dict[str, float], list[list[float]]]:
    flags = ["--pooling", args.pooling] + (["--model", args.model] if args.model else [])
    with (
        start_serve(*flags) as server,
        httpx.Client(base_url=server.url("/v1"), timeout=3600) as http,
    ):

        def post(batch: list[list[int]]) -> list[list[float]]:
            r = http.post("/embeddings", json={"input": batch, "encoding_format": "base64"})
            r.raise_for_status()
            return [_decode(d["embedding"]) for d in r.json()["data"]]

        post(inputs[:4])  # warm-up
        start = time.perf_counter()
        batched = post(inputs)
        t_batch = time.perf_counter() - start
        start = time.perf_counter()
        for x in inputs:
            post([x])
        t_single = time.perf_counter() - start
    return {"batch": t_batch, "single": t_single}, batched


def offline_side(args, inputs: list[list[int]]) -> tuple[float, list[list[float]]]:
    from stencil import LLM

    llm = LLM(model=args.model, pooling=args.pooling, seed=0)
    llm.embed(inputs[:4])  # warm-up
    start = time.perf_counter()
    vecs = llm.embed(inputs)
    elapsed = time.perf_counter() - start
    del llm
    return elapsed, vecs


def hf_side(args, inputs: list[list[int]]) -> tuple[float, list[list[float]]]:
    """transformers, one input at a time: the base model's forward, pooling, L2 normalization."""
    import torch
    from transformers import AutoModel

    import stencil

    path = args.model or str(stencil.default_model_path())
    model = AutoModel.from_pretrained(path, dtype=torch.float32).eval()
    out = []
    with torch.inference_mode():
        model(torch.tensor([inputs[0]]))  # warm-up
        start = time.perf_counter()
        for ids in inputs:
            hidden = model(torch.tensor([ids])).last_hidden_state[0]  # [n, hidden]
            vec = hidden.mean(0) if args.pooling == "mean" else hidden[-1]
            out.append(torch.nn.functional.normalize(vec, dim=0).tolist())
        elapsed = time.perf_counter() - start
    return elapsed, out


def in_thread(fn: Any, *args: Any) -> Any:
    """Run ``fn`` in a worker thread, as the server steps its engine: on a busy 2-core machine
    torch's OpenMP team in the main thread spin-waits and runs several times slower."""
    box: list[Any] = []
    worker = threading.Thread(target=lambda: box.append(fn(*args)))
    worker.start()
    worker.join()
    return box[0]


def _decode(b64: str) -> list[float]:
    import base64
    import struct

    blob = base64.b64decode(b64)
    return list(struct.unpack(f"<{len(blob) // 4}f", blob))


def _max_diff(a: list[list[float]], b: list[list[float]]) -> float:
    return max(abs(x - y) for u, v in zip(a, b, strict=False) for x, y in zip(u, v, strict=True))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="model directory (default: embedded)")
    parser.add_argument("--num-inputs", type=int, default=256)
    parser.add_argument("--min-tokens", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--pooling", choices=["last", "mean"], default="last")
    parser.add_argument("--hf-subset", type=int, default=None, help="transformers on N inputs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sides", default="offline,server,hf", help="which of offline,server,hf")
    args = parser.parse_args(argv)

    from transformers import AutoTokenizer

    import stencil

    tok = AutoTokenizer.from_pretrained(args.model or str(stencil.default_model_path()))
    inputs = workload(tok, args.num_inputs, args.min_tokens, args.max_tokens, args.seed)
    n, tokens = len(inputs), sum(map(len, inputs))
    sides = set(args.sides.split(","))
    nan = float("nan")
    server_t, server_vecs = {"batch": nan, "single": nan}, []
    if "server" in sides:
        server_t, server_vecs = server_side(args, inputs)
    offline_t, offline_vecs = (
        in_thread(offline_side, args, inputs) if "offline" in sides else (nan, [])
    )
    subset = inputs[: args.hf_subset or n]
    hf_t, hf_vecs = in_thread(hf_side, args, subset) if "hf" in sides else (nan, [])
    sub_tokens = sum(map(len, subset))

    rows = [
        ["Stencil `LLM.embed`, one batched call", n, offline_t, n / offline_t, tokens / offline_t],
        ["Stencil server, one request of 256 inputs", n, server_t["batch"],
         n / server_t["batch"], tokens / server_t["batch"]],
        ["Stencil server, 256 sequential single requests", n, server_t["single"],
         n / server_t["single"], tokens / server_t["single"]],
        ["transformers, one at a time (forward + pooling)", len(subset), hf_t,
         len(subset) / hf_t, sub_tokens / hf_t],
    ]  # fmt: skip
    rows[1][0] = rows[1][0].replace("256", str(n))
    rows[2][0] = rows[2][0].replace("256", str(n))
    print(f"{n} inputs, {args.min_tokens}-{args.max_tokens} tokens ({tokens} tokens), "
          f"pooling={args.pooling}")  # fmt: skip
    print(table(["mode", "inputs", "seconds", "embeddings/s", "tokens/s"], rows))
    for name, vecs in (("offline", offline_vecs), ("server", server_vecs)):
        if vecs and hf_vecs:
            print(f"max |Stencil {name} - transformers| over {len(hf_vecs)} vectors: "
                  f"{_max_diff(vecs, hf_vecs):.2e}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
