"""Owns the model and the paged KV cache; turns a scheduled batch into logits rows."""

from __future__ import annotations

import logging
import threading

import torch

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
        self.num_blocks = config.num_kv_blocks or self._blocks_from_memory(
            config.kv_cache_memory, dtype
        )
        self.kv_caches = [(self._cache(dtype), self._cache(dtype)) for _ in range(self.num_layers)]
        self.bind = config.cpu_threads_bind == "auto" and device.type == "cpu"
        self._bound_thread: int | None = None
        logger.info("KV cache: %d blocks x %d tokens", self.num_blocks, self.block_size)

    def _cache(self, dtype: torch.dtype) -> torch.Tensor:
        """One layer's K or V cache, logical shape ``[num_blocks, block_size, kv_heads, dim]``.
        The CPU paths store it head-major: each block of one head is a contiguous matrix."""
        if self.ops.name != "triton":
            store = torch.zeros(
                self.kv_heads,
                self.num_blocks,
                self.block_size,
                self.head_dim,
                dtype=dtype,
                device=self.device,
            )
            return store.permute(1, 2, 0, 3)
        return torch.zeros(
            self.num_blocks,
            self.block_size,
            self.kv_heads,
            self.head_dim,
            dtype=dtype,
            device=self.device,
        )

    def _blocks_from_memory(self, budget: int, dtype: torch.dtype) -> int:
        per_block = 2 * self.num_layers * self.block_size * self.kv_heads * self.head_dim
        per_block *= torch.tensor([], dtype=dtype).element_size()
        return max(budget // per_block, 2)

    @torch.inference_mode()
    def execute(self, sched: SchedulerOutput) -> tuple[torch.Tensor, list[Sequence]]:
        """Run one forward. Returns logits ``[rows, vocab]`` for the sequences that sample."""
        if self.bind and self._bound_thread != threading.get_ident():
            self._bind_threads()
        self._copy_blocks(sched.copies)
        computed = [s for s in sched.scheduled if s.num_new_tokens > 0]
        samplers = [s.seq for s in sched.scheduled if s.samples]
        if not computed:
            return torch.empty(0), []
        meta, input_ids, pos, row_of = self._prepare(computed)
        hidden = self.model(input_ids, pos, self.kv_caches, meta, self.ops)  # [T, hidden]
        self._pool(computed, hidden, meta.cu_seqlens_q)
        rows = [row_of[(seq.fork_of or seq).seq_id] for seq in samplers]
        if not rows:
            return torch.empty(0), []
        if rows != list(range(hidden.shape[0])):  # a decode step samples every row, in order
            hidden = hidden[torch.tensor(rows, device=self.device)]
        logits = self.model.compute_logits(hidden, self.ops)
        return logits, samplers

    def _prepare(self, computed) -> tuple[AttentionMetadata, torch.Tensor, torch.Tensor, dict]:
        """The step's metadata: token ids, positions and cache slots (one tensor of three rows),
        int32 block tables, offsets; and each sequence's last row (its logits row)."""
        ids: list[int] = []
        positions: list[int] = []
        slots: list[int] = []
        cu = [0]
        ctx: list[int] = []
        row_of: dict[int, int] = {}
        bs = self.block_size
        for s in computed:
            seq, start, n = s.seq, s.seq.num_computed_tokens, s.num_new_tokens
            table = seq.block_table
            if n == 1:  # a decode: one token
                ids.append(seq.token_ids[start])
                positions.append(start)
                slots.append(table[start // bs] * bs + start % bs)
            else:
                ids += seq.token_ids[start : start + n]
                positions += range(start, start + n)
                slots += [table[p // bs] * bs + p % bs for p in range(start, start + n)]
            cu.append(cu[-1] + n)
            ctx.append(start + n)
            row_of[seq.seq_id] = cu[-1] - 1
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
        return meta, flat[0], flat[1], row_of

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

    def _copy_blocks(self, copies: list[tuple[int, int]]) -> None:
        if not copies:
            return
        src = torch.tensor([c[0] for c in copies], device=self.device)
        dst = torch.tensor([c[1] for c in copies], device=self.device)
        for k, v in self.kv_caches:
            k[dst] = k[src]
            v[dst] = v[src]
