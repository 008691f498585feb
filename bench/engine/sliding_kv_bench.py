"""KV memory of one Gemma 3 sequence at 8k tokens: sliding-window layers in their own pool
(blocks freed once they leave the window) against the same model with full attention on every
layer (``layer_types`` all full: every layer keeps every token).

Random weights in Gemma 3 270M's shape (18 layers, 5 of 6 sliding with window 512, head_dim 256,
one KV head; SmolLM2's tokenizer and a 49,152-token vocabulary, which the KV cache does not
depend on). The prompt is prefilled in chunks of ``--chunk`` tokens, then a few tokens decoded;
the sequence's blocks are read from the block manager after every step. KV bytes are
deterministic (one run each); the prefill time is printed for reference only.

    python -m bench.engine.sliding_kv_bench --tokens 8192
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from bench.common import table
from stencil import SamplingParams
from stencil.testing.tiny_models import build_tiny_model, make_llm


def gemma3_270m(full_only: bool, window: int):
    from transformers import Gemma3TextConfig

    layers = 18
    types = [
        "full_attention" if full_only or (i + 1) % 6 == 0 else "sliding_attention"
        for i in range(layers)
    ]
    return Gemma3TextConfig(
        vocab_size=49152,
        hidden_size=640,
        intermediate_size=2048,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=256,
        query_pre_attn_scalar=256,
        sliding_window=window,
        layer_types=types,
        max_position_embeddings=32768,
        bos_token_id=2,
        eos_token_id=1,
        pad_token_id=0,
    )


def held_bytes(llm, seq) -> int:
    """Bytes of KV the sequence holds now: its blocks in each pool times that pool's layers."""
    runner = llm.engine.runner
    per_layer_block = runner._block_bytes(next(iter(runner.kv_caches))[0].dtype)
    n_sliding = sum(runner.sliding_layers)
    full = sum(b >= 0 for b in seq.block_table) * (runner.num_layers - n_sliding)
    sliding = sum(b >= 0 for b in seq.sliding_table) * n_sliding
    return (full + sliding) * per_layer_block


def pool_bytes(llm) -> int:
    return sum(k.numel() * k.element_size() * 2 for k, _ in llm.engine.runner.kv_caches)


def run(model_dir: Path, tokens: int, chunk: int, decode: int) -> dict:
    llm = make_llm(
        model_dir,
        block_size=16,
        max_model_len=tokens + decode + 16,
        max_num_seqs=1,
        max_num_batched_tokens=chunk,
        num_threads=os.cpu_count(),
    )
    eng = llm.engine
    prompt = [3 + (37 * i) % 40000 for i in range(tokens)]
    eng.add_request("long", prompt, SamplingParams(temperature=0, max_tokens=decode))
    peak, at_prompt, t0 = 0, None, time.perf_counter()
    while eng.has_unfinished_requests():
        eng.step()
        running = eng.scheduler.running
        if not running:
            break
        seq = running[0]
        peak = max(peak, held_bytes(llm, seq))
        if at_prompt is None and seq.num_computed_tokens >= tokens:
            at_prompt = (held_bytes(llm, seq), time.perf_counter() - t0)
    return {"held": at_prompt[0], "peak": peak, "pool": pool_bytes(llm), "prefill_s": at_prompt[1]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--chunk", type=int, default=1024, help="max_num_batched_tokens")
    ap.add_argument("--window", type=int, default=512)
    ap.add_argument("--decode", type=int, default=4)
    args = ap.parse_args()
    from stencil import default_model_path

    rows, results = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, full_only in (("full attention on every layer", True), ("Stencil", False)):
            config = gemma3_270m(full_only, args.window)
            path = build_tiny_model(name, Path(tmp) / str(full_only), default_model_path(), config)
            results[name] = r = run(path, args.tokens, args.chunk, args.decode)
            rows.append(
                [name, r["held"] / 2**20, r["peak"] / 2**20, r["pool"] / 2**20, r["prefill_s"]]
            )
    base = results["full attention on every layer"]["held"]
    for row, r in zip(rows, results.values(), strict=True):
        row.insert(2, r["held"] / base)
    print(
        f"Gemma 3 270M shape, {args.tokens} tokens, window {args.window}, fp32, block 16, "
        f"chunks of {args.chunk}; load {os.getloadavg()[0]:.1f}"
    )
    headers = [
        "KV layout",
        "held at prompt end MiB",
        "vs full",
        "peak MiB",
        "pool MiB",
        "prefill s",
    ]
    print(table(headers, rows))


if __name__ == "__main__":
    main()
