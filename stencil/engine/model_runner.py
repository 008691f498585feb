"""Owns the model and the paged KV cache; turns a scheduled batch into logits rows."""

from __future__ import annotations

import contextlib
import logging
import threading

import torch

from stencil.engine import fused_forward
from stencil.engine.attention import AttentionMetadata
from stencil.engine.config import EngineConfig
from stencil.engine.scheduler import SchedulerOutput
from stencil.engine.sequence import Sequence

logger = logging.getLogger(__name__)


class ModelRunner:
    def __init__(
        self, config: EngineConfig, model, device: torch.device, dtype: torch.dtype
    ) -> None:
        from stencil.kernels import get_kernels

        self.model = model
        self.device = device
        self.block_size = config.block_size
        self.ops = get_kernels(device, config.attention_backend)
        if self.ops.pack_weight is not None:
            model.pack_linear_weights(self.ops.pack_weight)
        mc = model.config
        self.num_layers = mc.num_hidden_layers
        self.kv_heads = getattr(mc, "num_key_value_heads", None) or mc.num_attention_heads
        self.head_dim = getattr(mc, "head_dim", None) or mc.hidden_size // mc.num_attention_heads
        windows = [getattr(layer.self_attn, "sliding_window", None) for layer in model.layers]
        self.sliding_layers = [w is not None for w in windows]
        self.window = max((w for w in windows if w is not None), default=None)
        self.num_blocks, self.num_sliding_blocks = kv_pool_sizes(
            config, self.sliding_layers, self.window, self._block_bytes(dtype)
        )
        self.kv_caches = [
            (self._cache(dtype, n), self._cache(dtype, n))
            for n in (
                self.num_sliding_blocks if s else self.num_blocks for s in self.sliding_layers
            )
        ]
        # a plain Llama-shaped quantized model: its layers in one C call (as model.forward)
        self.fused = fused_forward.install(model, self.kv_caches, self.ops, dtype)
        self.bind = config.cpu_threads_bind == "auto" and device.type == "cpu"
        self._bound_thread: int | None = None
        logger.info("KV cache: %d blocks x %d tokens", self.num_blocks, self.block_size)
        if self.window is not None:
            logger.info("sliding-window KV: %d blocks", self.num_sliding_blocks)

    def _cache(self, dtype: torch.dtype, num_blocks: int) -> torch.Tensor:
        """One layer's K or V cache, logical shape ``[num_blocks, block_size, kv_heads, dim]``.
        The CPU paths store it head-major: each block of one head is a contiguous matrix."""
        if self.ops.name != "triton":
            store = torch.zeros(
                self.kv_heads,
                num_blocks,
                self.block_size,
                self.head_dim,
                dtype=dtype,
                device=self.device,
            )
            return store.permute(1, 2, 0, 3)
        return torch.zeros(
            num_blocks,
            self.block_size,
            self.kv_heads,
            self.head_dim,
            dtype=dtype,
            device=self.device,
        )

    def _block_bytes(self, dtype: torch.dtype) -> int:
        """One block of one layer: its keys and values."""
        per_block = 2 * self.block_size * self.kv_heads * self.head_dim
        return per_block * torch.tensor([], dtype=dtype).element_size()

    @torch.inference_mode()
    def execute(self, sched: SchedulerOutput) -> tuple[torch.Tensor, list[Sequence]]:
        """Run one forward. Returns logits ``[rows, vocab]`` for the sequences that sample: one
        row each, k + 1 consecutive rows for one with k speculative drafts."""
        if self.bind and self._bound_thread != threading.get_ident():
            self._bind_threads()
        self._copy_blocks(sched.copies, sliding=False)
        self._copy_blocks(sched.sliding_copies, sliding=True)
        computed = [s for s in sched.scheduled if s.num_new_tokens > 0]
        samplers = [s.seq for s in sched.scheduled if s.samples]
        if not computed:
            return torch.empty(0), []
        meta, input_ids, pos, row_of = self._prepare(computed)
        with flush_denormal():
            hidden = self.model(input_ids, pos, self.kv_caches, meta, self.ops)  # [T, hidden]
        self._pool(computed, hidden, meta.cu_seqlens_q)
        rows = []  # each sampler's logits row, or its k + 1 rows when it has drafts
        for seq in samplers:
            first = row_of[(seq.fork_of or seq).seq_id]
            rows += range(first, first + 1 + len(seq.spec_token_ids))
        if not rows:
            return torch.empty(0), []
        if rows != list(range(hidden.shape[0])):  # a decode step samples every row, in order
            hidden = hidden[torch.tensor(rows, device=self.device)]
        with flush_denormal():
            logits = self.model.compute_logits(hidden, self.ops)
        return logits, samplers

    def _prepare(self, computed) -> tuple[AttentionMetadata, torch.Tensor, torch.Tensor, dict]:
        """The step's metadata: token ids, positions and cache slots (one tensor of three rows),
        int32 block tables, offsets; and each sequence's first logits row (its last token's,
        or with drafts the row of the token before them)."""
        ids: list[int] = []
        positions: list[int] = []
        slots: list[int] = []
        cu = [0]
        ctx: list[int] = []
        row_of: dict[int, int] = {}
        bs = self.block_size
        for s in computed:
            seq, start, n = s.seq, s.seq.num_computed_tokens, s.num_new_tokens
            table, drafts = seq.block_table, seq.spec_token_ids
            if drafts:  # the pending tokens, then the drafts
                ids += seq.token_ids[start:] + drafts
                positions += range(start, start + n)
                slots += [table[p // bs] * bs + p % bs for p in range(start, start + n)]
            elif n == 1:  # a decode: one token
                ids.append(seq.token_ids[start])
                positions.append(start)
                slots.append(table[start // bs] * bs + start % bs)
            else:
                ids += seq.token_ids[start : start + n]
                positions += range(start, start + n)
                slots += [table[p // bs] * bs + p % bs for p in range(start, start + n)]
            cu.append(cu[-1] + n)
            ctx.append(start + n)
            row_of[seq.seq_id] = cu[-1] - 1 - len(drafts)
        width = max(len(s.seq.block_table) for s in computed)
        tables = torch.tensor(
            [s.seq.block_table + [0] * (width - len(s.seq.block_table)) for s in computed],
            dtype=torch.int32,
            device=self.device,
        )
        flat = torch.tensor([ids, positions, slots], dtype=torch.int64, device=self.device)
        meta = AttentionMetadata(
            slot_mapping=flat[2],
            block_tables=tables,
            cu_seqlens_q=cu,
            context_lens=ctx,
            prompt_lens=[s.seq.prompt_len for s in computed],
        )
        if self.window is not None:
            meta.sliding = self._sliding_meta(computed, meta)
        return meta, flat[0], flat[1], row_of

    def _sliding_meta(self, computed, meta: AttentionMetadata) -> AttentionMetadata:
        """The step's slots and tables in the sliding-window pool (entries behind each window
        point at block 0: the kernels never read them)."""
        bs = self.block_size
        slots: list[int] = []
        for s in computed:
            table, start = s.seq.sliding_table, s.seq.num_computed_tokens
            slots += [table[p // bs] * bs + p % bs for p in range(start, start + s.num_new_tokens)]
        width = max(len(s.seq.sliding_table) for s in computed)
        tables = torch.tensor(
            [
                [max(b, 0) for b in s.seq.sliding_table] + [0] * (width - len(s.seq.sliding_table))
                for s in computed
            ],
            dtype=torch.int32,
            device=self.device,
        )
        return AttentionMetadata(
            slot_mapping=torch.tensor(slots, dtype=torch.int64, device=self.device),
            block_tables=tables,
            cu_seqlens_q=meta.cu_seqlens_q,
            context_lens=meta.context_lens,
            prompt_lens=meta.prompt_lens,
        )

    def _bind_threads(self) -> None:
        """Pin this stepping thread's OpenMP team, once per thread that steps (each master thread
        has a team of its own)."""
        from stencil.kernels.cpu_threads import bind_threads

        self._bound_thread = threading.get_ident()
        if bind_threads(torch.get_num_threads()):
            logger.info("pinned %d threads one per CPU", torch.get_num_threads())

    @staticmethod
    def _pool(computed, hidden: torch.Tensor, cu: list[int]) -> None:
        """Hand embedding requests their chunk's final hidden states."""
        for i, s in enumerate(computed):
            if s.seq.pooler is not None:
                s.seq.pooler.add(hidden[cu[i] : cu[i + 1]])  # [n, hidden]

    def _copy_blocks(self, copies: list[tuple[int, int]], sliding: bool) -> None:
        if not copies:
            return
        src = torch.tensor([c[0] for c in copies], device=self.device)
        dst = torch.tensor([c[1] for c in copies], device=self.device)
        for (k, v), s in zip(self.kv_caches, self.sliding_layers, strict=True):
            if s != sliding:
                continue
            k[dst] = k[src]
            v[dst] = v[src]


def kv_pool_sizes(config: EngineConfig, sliding: list[bool], window, block_bytes: int):
    """(full-attention blocks, sliding-window blocks): the sliding pool holds every running
    sequence's window plus one step's tokens (a step that needs more preempts); the full pool
    gets the rest of ``kv_cache_memory`` (or ``num_kv_blocks``)."""
    bs, layers = config.block_size, len(sliding)
    n_sliding = sum(sliding)
    if not n_sliding:
        return config.num_kv_blocks or max(config.kv_cache_memory // (block_bytes * layers), 2), 0
    step = -(-(window - 1 + config.max_num_batched_tokens) // bs) + 2  # one sequence's peak
    want = config.max_num_seqs * (-(-(window - 1) // bs) + 2) + step
    if config.num_kv_blocks is not None:
        return config.num_kv_blocks, max(min(want, config.num_kv_blocks), step)
    total = config.kv_cache_memory // block_bytes  # layer-blocks the budget holds
    n_sliding_blocks = max(min(want, total // layers), step)
    full_layers = layers - n_sliding
    if not full_layers:  # the full pool only keeps the books (prefix hashes, lengths)
        return max(total // layers, 2), n_sliding_blocks
    return max((total - n_sliding_blocks * n_sliding) // full_layers, 2), n_sliding_blocks


@contextlib.contextmanager
def flush_denormal():
    """Denormals flushed to zero for the forward only (a few dequantized weights are denormal,
    slow on CPU). The mode is per thread and would otherwise leak into the caller's own maths."""
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(False)
