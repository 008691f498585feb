"""Quantized GGUF inference on CPU: Stencil with the weights kept as stored vs the same file
dequantized to fp32 (``quantization="none"``), on the embedded SmolLM2 Q4_1 file and on a
random-weight Qwen2.5-0.5B-shaped model written as Q8_0 and as a Q4_K_M-like mix (generated here
into the cache, never committed). Output tok/s on the engine workload (scaled down) and on a
decode-heavy one, resident weight bytes vs the file's tensor bytes; ``--kernels`` times one
linear per kernel (torch's weight-only ops, oneDNN fp32/bf16, Stencil's C kernel).

    python -m bench.engine.quant_bench [--threads 2] [--requests 16] [--models smollm2 qwen-q8_0 qwen-q4_k_m]
        [--workloads engine decode json] [--bf16-activations] [--repeat 3] [--no-llama-cpp]
    python -m bench.engine.quant_bench --kernels
    python -m bench.engine.quant_bench --rss-7b      # a random 7B-shaped Q4_0 file: load + generate, peak RSS

Engines alternate (kept, fp32, llama.cpp; ``--repeat`` rounds, ``bench.common.compare``), each
warmed outside the workload; the llama.cpp row runs ``llama-server -np 16``
(``bench/peers/llama_server.py``; its build: docs/engine.md) on the same file, with
``json_schema`` for the JSON workload."""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import gguf
import numpy as np
import torch

import bench.peers.llama_server as llama_server
from bench.common import MIN_ROUNDS, compare, median, summary, table
from bench.shapes import QWEN_05B
from bench.workload import Item, make_workload, outside_prompt
from stencil import LLM, SamplingParams, default_model_path
from stencil.constraints import Constraint
from stencil.engine import fused_forward
from stencil.engine.models.default_model import _fetch_gguf
from stencil.engine.models.quantized import weight_bytes
from stencil.paths import cache_root
from stencil.testing.gguf_writer import Encoded, write_model_gguf


def q4_k_m(name: str, shape) -> str:
    """llama.cpp's Q4_K_M recipe, roughly: Q6_K for the embedding and for attn_v / ffn_down in
    the first half of the layers (and every third after), Q4_K elsewhere; rows that are not a
    multiple of 256 values fall back as llama-quantize does (Q4_K -> Q5_0, Q6_K -> Q8_0: in
    Qwen2.5-0.5B every tensor but ffn_down, whose rows hold 4,864 values)."""
    if "embed" in name:
        kind = "Q6_K"
    elif name.endswith(("v_proj.weight", "down_proj.weight")):
        layer = int(name.split(".")[2])
        kind = "Q6_K" if layer < 12 or layer % 3 == 0 else "Q4_K"
    else:
        kind = "Q4_K"
    if shape[-1] % 256:
        return {"Q4_K": "Q5_0", "Q6_K": "Q8_0"}[kind]
    return kind


def qwen_file(kind: str) -> Path:
    from transformers import Qwen2Config

    path = cache_root() / "bench" / f"qwen2.5-0.5b-random-{kind}.gguf"
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    config = Qwen2Config(**QWEN_05B)
    rng = np.random.default_rng(0)
    state: dict[str, np.ndarray] = {}
    h, inter, kv = 896, 4864, 2 * 64
    shapes = {"model.embed_tokens.weight": (151936, h), "model.norm.weight": (h,)}
    for i in range(24):
        p = f"model.layers.{i}."
        shapes.update(
            {
                p + "self_attn.q_proj.weight": (h, h),
                p + "self_attn.q_proj.bias": (h,),
                p + "self_attn.k_proj.weight": (kv, h),
                p + "self_attn.k_proj.bias": (kv,),
                p + "self_attn.v_proj.weight": (kv, h),
                p + "self_attn.v_proj.bias": (kv,),
                p + "self_attn.o_proj.weight": (h, h),
                p + "mlp.gate_proj.weight": (inter, h),
                p + "mlp.up_proj.weight": (inter, h),
                p + "mlp.down_proj.weight": (h, inter),
                p + "input_layernorm.weight": (h,),
                p + "post_attention_layernorm.weight": (h,),
            }
        )
    for name, shape in shapes.items():
        std = 0.02 if "embed" in name else 0.05
        state[name] = (
            1 + 0.1 * rng.standard_normal(shape)
            if "norm" in name
            else std * rng.standard_normal(shape)
        ).astype(np.float32)
    qtype = (lambda n, s: "Q8_0") if kind == "q8_0" else q4_k_m
    tmp = path.with_suffix(".part")
    write_model_gguf(tmp, config, state, qtype, _fetch_gguf(cache_root() / "downloads"))
    tmp.rename(path)
    return path


LLAMA_7B = dict(
    hidden_size=4096,
    num_hidden_layers=32,
    num_attention_heads=32,
    num_key_value_heads=32,
    intermediate_size=11008,
    vocab_size=49152,  # SmolLM2's tokenizer, copied into the file
    tie_word_embeddings=False,
    max_position_embeddings=4096,
    rms_norm_eps=1e-5,
    rope_theta=1e4,
)


def random_q4_0(shape: tuple[int, int], rng: np.random.Generator) -> Encoded:
    """Random Q4_0 blocks (fp16 scale 0.004 + 32 random nibbles): no float32 copy of the weights."""
    n, k = shape
    blocks = rng.integers(0, 256, (n, k // 32, 18), dtype=np.uint8)
    blocks[..., :2] = np.array([0.004], dtype=np.float16).view(np.uint8)
    return Encoded("Q4_0", blocks.reshape(n, -1))


def llama_7b_file() -> Path:
    """A Llama-2-7B-shaped Q4_0 file (norms F32) in the cache; ~3.9 GB, never committed."""
    from transformers import LlamaConfig

    path = cache_root() / "bench" / "llama-7b-random-q4_0.gguf"
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    c = LlamaConfig(**LLAMA_7B)
    h, inter, v = c.hidden_size, c.intermediate_size, c.vocab_size
    rng = np.random.default_rng(0)
    state: dict[str, np.ndarray | Encoded] = {
        "model.embed_tokens.weight": random_q4_0((v, h), rng),
        "model.norm.weight": np.ones(h, dtype=np.float32),
        "lm_head.weight": random_q4_0((v, h), rng),
    }
    for i in range(c.num_hidden_layers):
        p = f"model.layers.{i}."
        for name, shape in (
            ("self_attn.q_proj", (h, h)),
            ("self_attn.k_proj", (h, h)),
            ("self_attn.v_proj", (h, h)),
            ("self_attn.o_proj", (h, h)),
            ("mlp.gate_proj", (inter, h)),
            ("mlp.up_proj", (inter, h)),
            ("mlp.down_proj", (h, inter)),
        ):
            state[p + name + ".weight"] = random_q4_0(shape, rng)
        state[p + "input_layernorm.weight"] = np.ones(h, dtype=np.float32)
        state[p + "post_attention_layernorm.weight"] = np.ones(h, dtype=np.float32)
    tmp = path.with_suffix(".part")
    write_model_gguf(tmp, c, state, lambda n, s: "Q4_0", _fetch_gguf(cache_root() / "downloads"))
    tmp.rename(path)
    return path


_RSS_CHILD = """
import json, sys, time
from stencil import LLM, SamplingParams
t = time.perf_counter()
llm = LLM(sys.argv[1], num_threads=int(sys.argv[2]), max_model_len=512, kv_cache_memory=256 << 20)
load = time.perf_counter() - t
t = time.perf_counter()
out = llm.generate(["The capital of France is"], SamplingParams(max_tokens=16, ignore_eos=True))
n = len(out[0].outputs[0].token_ids)
print(json.dumps({"load_s": load, "tokens": n, "decode_s": time.perf_counter() - t}))
"""


def bench_rss_7b(args) -> None:
    """Load + generate from the 7B Q4_0 file in a child process; its peak RSS (ru_maxrss)."""
    path = llama_7b_file()
    file_bytes = sum(int(t.n_bytes) for t in gguf.GGUFReader(str(path)).tensors)
    proc = subprocess.run(
        [sys.executable, "-c", _RSS_CHILD, str(path), str(args.threads)],
        capture_output=True,
        text=True,
        check=True,
    )
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    row = [
        path.name,
        f"{file_bytes / 2**30:.2f}",
        f"{peak / 2**30:.2f}",
        f"{res['load_s']:.0f}",
        f"{res['tokens'] / res['decode_s']:.2f}",
    ]
    print(
        table(
            ["file", "tensor GiB", "peak RSS GiB", "load s", "tok/s (1 request, 16 tokens)"], [row]
        )
    )


PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 40},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
    },
    "required": ["name", "age"],
}


WORKLOADS = ("engine", "decode", "json")


def params(label: str, max_tokens: int) -> SamplingParams:
    """The "json" workload asks for PERSON and stops where the JSON closes; the others ignore EOS."""
    if label == "json":
        return SamplingParams(
            temperature=0, max_tokens=max_tokens, constraint=Constraint.json_schema(PERSON)
        )
    return SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)


def run(
    path: Path, quantization: str | None, items, threads: int, int8_activations: bool = True
) -> dict:
    llm = LLM(
        str(path),
        quantization=quantization,
        num_threads=threads,
        max_num_seqs=64,
        max_num_batched_tokens=1024,
        num_kv_blocks=2048,
    )
    eng = llm.engine
    if not int8_activations:
        from stencil.kernels import cpu_quant

        eng.runner.ops.linear.quant = cpu_quant.load(int8_activations=False)
        fused_forward.uninstall(eng.runner.model)  # the layer loop calls the int8-row kernel
    warm = outside_prompt(next(iter(items.values()))[0].prompt_ids)
    llm.generate([warm, warm], [params("engine", 4), params("json", 8)], use_tqdm=False)
    out = {"weights": weight_bytes(eng.runner.model)}
    for label, work in items.items():
        before = eng.get_metrics()["generation_tokens_total"]
        for i, it in enumerate(work):
            eng.add_request(f"{label}{i}", it.prompt_ids, params(label, it.max_tokens))
        t = time.perf_counter()
        while eng.has_unfinished_requests():
            eng.step()
        out[label] = (eng.get_metrics()["generation_tokens_total"] - before) / (
            time.perf_counter() - t
        )
    return out


def run_llama_cpp(path: Path, items, threads: int) -> dict:
    """The same workloads through ``llama-server -np 16`` on the same file."""
    server = llama_server.start(path, threads)
    try:
        warm = [Item(outside_prompt(next(iter(items.values()))[0].prompt_ids), 4)]
        llama_server.output_tok_s(server, warm)
        llama_server.output_tok_s(server, warm, PERSON, eos=True)
        return {
            label: llama_server.output_tok_s(
                server, work, PERSON if label == "json" else None, eos=label == "json"
            )
            for label, work in items.items()
        }
    finally:
        server.stop()


def bench_models(args) -> None:
    from transformers import AutoTokenizer

    files = {"smollm2": _fetch_gguf(cache_root() / "downloads")}
    for m in args.models:
        if m.startswith("qwen-"):
            files[m] = qwen_file(m.removeprefix("qwen-"))
    tok = AutoTokenizer.from_pretrained(str(default_model_path()))
    n = args.requests
    items = {
        "engine": make_workload(tok, n=n, prompt_range=(32, 256), output_range=(16, 128)),
        "decode": make_workload(tok, n=n, seed=1, prompt_range=(8, 16), output_range=(96, 128)),
        "json": make_workload(tok, n=n, seed=2, prompt_range=(32, 256), output_range=(64, 64)),
    }
    items = {label: work for label, work in items.items() if label in args.workloads}
    engines = {
        "Stencil, kept quantized": lambda path: run(path, None, items, args.threads),
        "Stencil, dequantized fp32": lambda path: run(path, "none", items, args.threads),
    }
    if args.bf16_activations:  # the kernel without VNNI: kept weights, bf16 activations
        engines["Stencil, kept, bf16 activations"] = lambda path: run(
            path, None, items, args.threads, int8_activations=False
        )
    if llama_server.available() and not args.no_llama_cpp:
        engines["llama.cpp llama-server -np 16"] = lambda path: run_llama_cpp(
            path, items, args.threads
        )
    rows, notes = [], []
    for name in args.models:
        path = files[name]
        file_bytes = sum(int(t.n_bytes) for t in gguf.GGUFReader(str(path)).tensors)
        res = compare({e: partial(go, path) for e, go in engines.items()}, args.repeat)
        notes.append(f"{name}: {summary(res, args.repeat)}")
        med = {
            e: {k: median([x.result[k] for x in rs]) for k in rs[0].result} for e, rs in res.items()
        }
        fp32 = med["Stencil, dequantized fp32"]
        for engine, m in med.items():
            weights = m.get("weights")
            rows.append(
                [
                    name,
                    engine,
                    *(f"{m[label]:.1f}" if label in m else "-" for label in WORKLOADS),
                    f"{m['decode'] / fp32['decode']:.2f}x" if "decode" in m else "-",
                    f"{weights / 2**20:.0f}" if weights else "-",
                    f"{weights / file_bytes:.2f}x" if weights else "-",
                    " / ".join(f"{x.load:.1f}" for x in res[engine]),
                ]
            )
    print(f"\n{args.threads} threads, {n} requests each; " + "; ".join(notes) + "\n")
    print(
        table(
            [
                "file",
                "engine",
                "engine tok/s",
                "decode tok/s",
                "JSON schema tok/s",
                "decode vs fp32",
                "weights MiB",
                "vs file tensor bytes",
                "load after each run",
            ],
            rows,
        )
    )


def bench_kernels(args) -> None:
    from stencil.kernels import cpu_quant
    from stencil.kernels.quant_weight import pack

    q = cpu_quant.load()
    rng = np.random.default_rng(0)

    def best(f, *a) -> float:
        if f is None:
            return float("nan")
        f(*a)
        times = []
        for _ in range(15):
            t = time.perf_counter()
            f(*a)
            times.append(time.perf_counter() - t)
        return 1e3 * min(times)

    rows = []
    for n, k in ((1152, 896), (9728, 896), (896, 4864)):
        w = torch.randn(n, k)
        dense = {
            dt: torch.ops.mkldnn._reorder_linear_weight(w.to(dt), 64)
            for dt in (torch.float32, torch.bfloat16)
        }
        i8 = torch.randint(-127, 127, (n, k), dtype=torch.int8)
        scales = torch.rand(n, dtype=torch.bfloat16)
        i4 = torch.ops.aten._convert_weight_to_int4pack_for_cpu(
            torch.randint(0, 16, (n, k), dtype=torch.int32), 1
        )
        sz = torch.rand(k // 32, n, 2, dtype=torch.bfloat16)
        w8 = pack(
            rng.integers(-128, 128, (n, k)).astype(np.int8),
            rng.random((n, k // 32)),
            None,
            8,
            32,
            0,
        )
        w4 = pack(
            rng.integers(0, 16, (n, k)).astype(np.uint8),
            rng.random((n, k // 32)),
            rng.random((n, k // 32)),
            4,
            32,
            0,
        )
        for m in (1, 16, 64):
            x = torch.randn(m, k)
            xb = x.bfloat16()
            onednn = torch.ops.mkldnn._linear_pointwise
            times = (
                best(onednn, x, dense[torch.float32], None, "none", [], ""),
                best(onednn, xb, dense[torch.bfloat16], None, "none", [], ""),
                best(torch.ops.aten._weight_int8pack_mm, xb, i8, scales),
                best(torch.ops.aten._weight_int4pack_mm_for_cpu, xb, i4, 32, sz),
                best(q, x, w8),
                best(q, x, w4),
            )
            rows.append([f"{n}x{k}", m] + [f"{t:.3f}" for t in times])
    print(
        table(
            [
                "weight",
                "rows",
                "oneDNN fp32",
                "oneDNN bf16",
                "torch int8 (bf16 x)",
                "torch int4 g32 (bf16 x)",
                "Stencil Q8_0",
                "Stencil Q4_1",
            ],
            rows,
        )
    )
    print(f"ms per call, best of 15, {torch.get_num_threads()} threads")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=MIN_ROUNDS)
    ap.add_argument("--models", nargs="+", default=["smollm2", "qwen-q8_0", "qwen-q4_k_m"])
    ap.add_argument("--kernels", action="store_true")
    ap.add_argument("--rss-7b", action="store_true")
    ap.add_argument("--no-llama-cpp", action="store_true")
    ap.add_argument("--workloads", nargs="+", choices=WORKLOADS, default=list(WORKLOADS))
    ap.add_argument(
        "--bf16-activations", action="store_true", help="also the kept weights on the bf16 kernel"
    )
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.kernels:
        bench_kernels(args)
    elif args.rss_7b:
        bench_rss_7b(args)
    else:
        bench_models(args)


if __name__ == "__main__":
    main()
