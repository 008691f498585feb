"""Mixture-of-experts on CPU: Stencil beside llama.cpp's ``llama-server`` on the same GGUF file, a
random-weight Qwen3-MoE-shaped model (hidden 2048, 32 query / 4 KV heads of 128, 64 experts of
768, 8 active, renormalised; fewer layers than Qwen3-30B-A3B's 48 so that it fits this machine),
every projection and expert in Q4_K, the embedding and output in Q8_0, the router and norms in
F32. Generated into the cache (never committed).

    python -m bench.engine.moe_bench [--layers 8] [--threads 2] [--repeat 3] [--concurrency 1 16]
        [--prompt 32 128] [--output 96 128]

Output tok/s with N requests submitted at once (prompt and output lengths drawn from the ranges,
EOS ignored); each engine loaded once and warmed on a prompt outside the workload, prefix caching
on in both (the prompts share no block), runs alternated (Stencil, llama.cpp, ...) ``--repeat``
times by ``bench.common.compare``, medians with the 1-minute load average after each run.
``$LLAMA_SERVER`` names the binary.
"""

from __future__ import annotations

import argparse
import time
from functools import partial
from pathlib import Path

import numpy as np

import bench.peers.llama_server as llama_server
from bench.common import MIN_ROUNDS, compare, median, results, summary, table
from bench.workload import Item, make_workload, outside_prompt
from stencil import LLM, SamplingParams, default_model_path
from stencil.engine.models.default_model import _fetch_gguf
from stencil.engine.models.quantized import weight_bytes
from stencil.paths import cache_root
from stencil.testing.gguf_moe_writer import write_moe_gguf
from stencil.testing.gguf_writer import Encoded

SHAPE = dict(
    hidden_size=2048,
    num_attention_heads=32,
    num_key_value_heads=4,
    head_dim=128,
    num_experts=64,
    num_experts_per_tok=8,
    moe_intermediate_size=768,
    intermediate_size=6144,
    norm_topk_prob=True,
    vocab_size=49152,  # SmolLM2's tokenizer, copied into the file
    max_position_embeddings=4096,
    rms_norm_eps=1e-6,
    tie_word_embeddings=False,
)


def random_q4_k(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Random Q4_K blocks (d 2^-9, dmin 2^-10, random 6-bit scales/mins and nibbles): [..., bytes]."""
    *lead, k = shape
    blocks = rng.integers(0, 256, (*lead, k // 256, 144), dtype=np.uint8)
    blocks[..., 0:2] = np.array([2.0**-9], dtype=np.float16).view(np.uint8)
    blocks[..., 2:4] = np.array([2.0**-10], dtype=np.float16).view(np.uint8)
    return blocks.reshape(*lead, -1)


def random_q8_0(shape: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    n, k = shape
    blocks = (
        rng.integers(-127, 128, (n, k // 32, 34), dtype=np.int16).astype(np.int8).view(np.uint8)
    )
    blocks[..., 0:2] = np.array([2.0**-10], dtype=np.float16).view(np.uint8)
    return blocks.reshape(n, -1)


def moe_file(layers: int) -> Path:
    from transformers import Qwen3MoeConfig

    path = cache_root() / "bench" / f"qwen3-moe-64x768-{layers}l-random-q4_k.gguf"
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    config = Qwen3MoeConfig(**SHAPE, num_hidden_layers=layers)
    h, e, inter, d = 2048, 64, 768, 128
    q, kv = 32 * d, 4 * d
    rng = np.random.default_rng(0)
    state: dict[str, np.ndarray | Encoded] = {
        "token_embd.weight": Encoded("Q8_0", random_q8_0((49152, h), rng)),
        "output.weight": Encoded("Q8_0", random_q8_0((49152, h), rng)),
        "model.norm.weight": np.ones(h, np.float32),
    }
    for i in range(layers):
        blk, hf = f"blk.{i}", f"model.layers.{i}"
        for name, shape in {
            "attn_q": (q, h),
            "attn_k": (kv, h),
            "attn_v": (kv, h),
            "attn_output": (h, q),
            "ffn_gate_exps": (e, inter, h),
            "ffn_up_exps": (e, inter, h),
            "ffn_down_exps": (e, h, inter),
        }.items():
            state[f"{blk}.{name}.weight"] = Encoded("Q4_K", random_q4_k(shape, rng))
        for norm, size in (("input_layernorm", h), ("post_attention_layernorm", h)):
            state[f"{hf}.{norm}.weight"] = (1 + 0.1 * rng.standard_normal(size)).astype(np.float32)
        for norm in ("q_norm", "k_norm"):
            state[f"{hf}.self_attn.{norm}.weight"] = np.ones(d, np.float32)
        state[f"{hf}.mlp.gate.weight"] = (0.05 * rng.standard_normal((e, h))).astype(np.float32)
    tmp = path.with_suffix(".part")
    write_moe_gguf(tmp, config, state, lambda n, s: "F32", _fetch_gguf(cache_root() / "downloads"))
    tmp.rename(path)
    return path


def params(n: int) -> SamplingParams:
    return SamplingParams(temperature=0, max_tokens=n, ignore_eos=True)


def stencil_run(llm: LLM, items: list[Item]) -> float:
    eng = llm.engine
    before = eng.get_metrics()["generation_tokens_total"]
    for i, it in enumerate(items):
        eng.add_request(f"r{time.monotonic_ns()}-{i}", it.prompt_ids, params(it.max_tokens))
    t = time.perf_counter()
    while eng.has_unfinished_requests():
        eng.step()
    return (eng.get_metrics()["generation_tokens_total"] - before) / (time.perf_counter() - t)


def main() -> None:
    from transformers import AutoTokenizer

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=MIN_ROUNDS)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--prompt", type=int, nargs=2, default=[32, 128], help="token range")
    ap.add_argument("--output", type=int, nargs=2, default=[96, 128], help="token range")
    args = ap.parse_args()
    path = moe_file(args.layers)
    tok = AutoTokenizer.from_pretrained(str(default_model_path()))
    work = {
        n: make_workload(
            tok, n=n, seed=n, prompt_range=tuple(args.prompt), output_range=tuple(args.output)
        )
        for n in args.concurrency
    }
    warm = [Item(outside_prompt(work[args.concurrency[0]][0].prompt_ids), 8)]
    llm = LLM(str(path), num_threads=args.threads, max_num_seqs=64, num_kv_blocks=1024)
    held = weight_bytes(llm.engine.runner.model)
    engines = {"Stencil": partial(stencil_run, llm)}
    server = None
    if llama_server.available():
        # --no-repack: this build's AMX repacking dies with SIGILL here (the VM grants no AMX
        # tile state); the plain CPU buffers run
        server = llama_server.start(
            path, args.threads, slots=16, ctx_per_slot=512, extra=("--no-repack",)
        )
        engines["llama.cpp llama-server -np 16"] = partial(llama_server.output_tok_s, server)
    else:
        print(f"llama-server not found at {llama_server.LLAMA_SERVER}: Stencil only")
    try:
        res = compare(
            {
                (name, n): partial(go, work[n])
                for n in args.concurrency
                for name, go in engines.items()
            },
            args.repeat,
            warm={name: partial(go, warm) for name, go in engines.items()},
        )
    finally:
        if server is not None:
            server.stop()
    rows = []
    for n in args.concurrency:
        peer = results(res.get(("llama.cpp llama-server -np 16", n), []))
        base = median(peer) if peer else None
        for name in engines:
            runs = res[(name, n)]
            med = median(results(runs))
            rows.append(
                [
                    n,
                    name,
                    f"{med:.1f}",
                    f"{med / base:.2f}x" if base else "-",
                    " / ".join(f"{r.result:.1f}" for r in runs),
                    " / ".join(f"{r.load:.1f}" for r in runs),
                ]
            )
    file_bytes = path.stat().st_size
    print(
        f"\n{path.name}: {args.layers} layers, {file_bytes / 2**20:.0f} MiB file, Stencil holds "
        f"{held / 2**20:.0f} MiB of weights; {args.threads} threads; {summary(res, args.repeat)}\n"
    )
    headers = ["requests", "engine", "output tok/s", "vs llama.cpp", "runs", "load after each"]
    print(table(headers, rows))


if __name__ == "__main__":
    main()
