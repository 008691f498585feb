"""GPU benchmark: Triton kernels against the reference (gather + SDPA, torch bitmask unpack).

    python -m bench.kernels.kernels_bench [--dtype bfloat16] [--heads 32 --kv-heads 8 --head-dim 128]

Prints markdown tables: decode paged attention for batch 1/8/64 x context 512/2048 (Triton; the
reference's gather + masked SDPA on device; ``reference.paged_attention`` as the engine would run
it without Triton, host-built mask included), and the bitmask apply for the same batch sizes over
a Qwen2.5-sized vocabulary. Needs CUDA; on a machine without one it says so and exits 0.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

import torch
import torch.nn.functional as F

from stencil.kernels import get_kernels, reference

BATCHES = (1, 8, 64)
CONTEXTS = (512, 2048)
VOCAB = 151_936  # Qwen2.5's padded vocabulary


def _bench_us(fn: Callable[[], object]) -> float:
    """Median microseconds of ``fn`` (triton's do_bench: warm-up, L2 flush, CUDA events)."""
    from triton.testing import do_bench

    return do_bench(fn, warmup=25, rep=200, return_mode="median") * 1000.0


def _gather_sdpa_decode(
    q: torch.Tensor,  # [B, heads, dim]
    k_cache: torch.Tensor,  # [num_blocks, block_size, kv_heads, dim]
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,  # [B, max_blocks]
    ctx: torch.Tensor,  # [B] on q's device
    scale: float,
) -> torch.Tensor:  # [B, heads, dim]
    """The reference's decode path (gather the pages, masked SDPA), kept on the GPU."""
    max_len = int(ctx.max())
    k = reference.gather_kv(k_cache, block_tables, max_len)  # [B, kv_heads, max_len, dim]
    v = reference.gather_kv(v_cache, block_tables, max_len)
    mask = torch.arange(max_len, device=q.device) < ctx.view(-1, 1, 1, 1)  # [B, 1, 1, max_len]
    out = F.scaled_dot_product_attention(
        q.unsqueeze(2), k, v, attn_mask=mask, scale=scale, enable_gqa=k.shape[1] != q.shape[1]
    )
    return out.squeeze(2)


def _decode_inputs(args: argparse.Namespace, batch: int, ctx: int) -> dict:
    dtype, dev, bs = getattr(torch, args.dtype), torch.device("cuda"), args.block_size
    blocks_per_seq = -(-ctx // bs)
    num_blocks = batch * blocks_per_seq + 8
    shape = (num_blocks, bs, args.kv_heads, args.head_dim)
    tables = torch.randperm(num_blocks, device=dev)[: batch * blocks_per_seq]
    return {
        "q": torch.randn(batch, args.heads, args.head_dim, dtype=dtype, device=dev),
        "k_cache": torch.randn(shape, dtype=dtype, device=dev),
        "v_cache": torch.randn(shape, dtype=dtype, device=dev),
        "block_tables": tables.view(batch, blocks_per_seq).to(torch.int32),
        "cu_seqlens_q": list(range(batch + 1)),
        "context_lens": [ctx] * batch,
        "scale": args.head_dim**-0.5,
    }


def _attention_row(args: argparse.Namespace, batch: int, ctx: int) -> str:
    a = _decode_inputs(args, batch, ctx)
    attention = get_kernels(torch.device("cuda")).paged_attention
    ctx_t = torch.tensor(a["context_lens"], device="cuda")
    ref_args = (a["q"], a["k_cache"], a["v_cache"], a["block_tables"], ctx_t, a["scale"])
    diff = (attention(**a).float() - _gather_sdpa_decode(*ref_args).float()).abs().max().item()
    t_tri = _bench_us(lambda: attention(**a))
    t_sdpa = _bench_us(lambda: _gather_sdpa_decode(*ref_args))
    t_ref = _bench_us(lambda: reference.paged_attention(**a))
    kv_bytes = 2 * batch * ctx * args.kv_heads * args.head_dim * a["k_cache"].element_size()
    gbps = kv_bytes / (t_tri * 1e-6) / 1e9
    return (
        f"| {batch} | {ctx} | {t_tri:.1f} | {t_sdpa:.1f} | {t_ref:.1f} | {t_sdpa / t_tri:.2f}x "
        f"| {gbps:.0f} | {diff:.1e} |"
    )


def _bitmask_row(batch: int) -> str:
    apply = get_kernels(torch.device("cuda")).apply_token_bitmask_inplace
    logits = torch.randn(batch, VOCAB, device="cuda")
    words = -(-VOCAB // 32)
    bitmask = torch.randint(-(2**31), 2**31, (batch, words), device="cuda", dtype=torch.int64)
    bitmask = bitmask.to(torch.int32)
    got, expect = logits.clone(), logits.clone()
    apply(got, bitmask)
    reference.apply_token_bitmask_inplace(expect, bitmask)
    same = "yes" if torch.equal(got, expect) else "NO"
    t_tri = _bench_us(lambda: apply(logits, bitmask))
    t_ref = _bench_us(lambda: reference.apply_token_bitmask_inplace(logits, bitmask))
    return f"| {batch} | {VOCAB} | {t_tri:.1f} | {t_ref:.1f} | {t_ref / t_tri:.2f}x | {same} |"


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--block-size", type=int, default=16)
    return p.parse_args()


def main() -> int:
    args = _parse()
    if not torch.cuda.is_available():
        print("kernels_bench needs a CUDA GPU (none found); nothing to run.")
        return 0
    torch.manual_seed(0)
    shape = f"heads={args.heads} kv_heads={args.kv_heads} head_dim={args.head_dim}"
    print(f"GPU: {torch.cuda.get_device_name()}  dtype={args.dtype} {shape} bs={args.block_size}\n")
    print("Decode paged attention (one query per sequence), median us\n")
    print(
        "| batch | context | triton | gather+SDPA | reference.paged_attention "
        "| speedup vs gather+SDPA | triton KV GB/s | max abs diff |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for batch in BATCHES:
        for ctx in CONTEXTS:
            print(_attention_row(args, batch, ctx), flush=True)
    print("\nBitmask apply (fp32 logits, random masks), median us\n")
    print("| rows | vocab | triton | reference | speedup | same result |")
    print("|---:|---:|---:|---:|---:|---|")
    for batch in BATCHES:
        print(_bitmask_row(batch), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
