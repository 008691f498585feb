"""The KV blocks of the sliding-window layers: a pool of their own (vLLM's hybrid allocator, one
extra KV-cache group) whose blocks a sequence gives back once they leave its window.

Each sequence holds ``sliding_table`` beside its ``block_table``: the same logical blocks, but an
entry is -1 where that block holds no key a future query can see. Queries from position ``c`` on
see keys from ``c - window + 1``, so after each step every block that ends before that is freed
(``first_needed``). Full blocks keep their prefix-cache hash when freed (like the full pool's), so a
prefix hit needs the full pool's blocks of the prefix and this pool's blocks of its last window.

Pure Python (no torch); only ``BlockManager`` calls it.
"""

from __future__ import annotations

from stencil.engine.block_pool import BlockPool

NONE = -1  # a table entry whose block has left the window (or was never needed)


class SlidingBlocks:
    def __init__(self, num_blocks: int, block_size: int, window: int) -> None:
        self.pool = BlockPool(num_blocks)
        self.block_size = block_size
        self.window = window

    def first_needed(self, num_computed: int) -> int:
        """The first block a query at position ``num_computed`` (or later) can see."""
        return max(num_computed - self.window + 1, 0) // self.block_size

    # ---- capacity ------------------------------------------------------------------------
    def blocks_needed(self, seq, num_tokens: int) -> int:
        """Fresh blocks ``allocate(seq, num_tokens)`` would take (copy-on-write included)."""
        table, bs = seq.sliding_table, self.block_size
        hi = -(-num_tokens // bs)
        need = sum(
            1
            for i in range(self.first_needed(seq.num_computed_tokens), hi)
            if i >= len(table) or table[i] == NONE
        )
        start = seq.num_computed_tokens // bs
        if start < len(table) and table[start] != NONE and seq.num_computed_tokens % bs:
            need += self.pool.blocks[table[start]].ref_count > 1
        return need

    def admit_need(self, hashes: list[int], num_tokens: int) -> int:
        """Blocks a fresh sequence takes from the free list when its prefix of ``len(hashes)``
        blocks (their chain hashes) is matched and its table grows to ``num_tokens`` slots."""
        lo = self.first_needed(len(hashes) * self.block_size)
        hi = -(-num_tokens // self.block_size)
        cached = [self.pool.hash_to_block[h] for h in hashes[lo:]]
        fresh = hi - max(lo, len(hashes))
        return fresh + sum(self.pool.blocks[b].ref_count == 0 for b in cached)

    def usable_prefix(self, hashes: list[int]) -> int:
        """The longest prefix (in blocks) of ``hashes`` whose last window is cached here."""
        m = len(hashes)
        index = self.pool.hash_to_block
        while m and not all(h in index for h in hashes[self.first_needed(m * self.block_size) : m]):
            m -= 1
        return m

    # ---- mutations -----------------------------------------------------------------------
    def take_prefix(self, seq, hashes: list[int]) -> None:
        """A fresh sequence's table for its matched prefix (chain ``hashes``): the cached blocks
        of the prefix's last window, NONE before it."""
        lo = self.first_needed(len(hashes) * self.block_size)
        seq.sliding_table = [NONE] * min(lo, len(hashes))
        for h in hashes[lo:]:
            bid = self.pool.hash_to_block[h]
            self.pool.ref(bid)
            seq.sliding_table.append(bid)

    def allocate(self, seq, num_tokens: int) -> list[tuple[int, int]]:
        """Blocks for every slot the step writes and every key it reads; returns (src, dst)
        copies owed for copy-on-write of a shared, partly filled block."""
        table, bs = seq.sliding_table, self.block_size
        copies = []
        start = seq.num_computed_tokens // bs
        if start < len(table) and table[start] != NONE and seq.num_computed_tokens % bs:
            bid = table[start]
            if self.pool.blocks[bid].ref_count > 1:
                table[start] = self.pool.pop_free()
                copies.append((bid, table[start]))
                self.pool.unref(bid)
        hi = -(-num_tokens // bs)
        table.extend([NONE] * (hi - len(table)))
        for i in range(self.first_needed(seq.num_computed_tokens), hi):
            if table[i] == NONE:
                table[i] = self.pool.pop_free()
        return copies

    def commit(self, seq, hashes: list[int] | None) -> None:
        """After a step: publish the computed full blocks' ``hashes`` (None: no prefix caching),
        then free every block that has left the window. ``hashes`` may run past the computed
        blocks (a preempted sequence keeps its hashes while it recomputes): only blocks whose
        every slot is computed are published."""
        table, lo = seq.sliding_table, self.first_needed(seq.num_computed_tokens)
        if hashes is not None:  # the held full blocks: a run at the end of the table's full part
            full = min(seq.num_computed_tokens, seq.num_tokens) // self.block_size
            i = min(full, len(hashes), len(table)) - 1
            while i >= 0 and table[i] != NONE:
                self.pool.publish(table[i], hashes[i])
                i -= 1
        for i in range(min(lo, len(table))):
            if table[i] != NONE:
                self.pool.unref(table[i])
                table[i] = NONE

    def fork(self, parent, child) -> None:
        for bid in parent.sliding_table:
            if bid != NONE:
                self.pool.ref(bid)
        child.sliding_table = list(parent.sliding_table)

    def free(self, seq) -> None:
        for bid in reversed(seq.sliding_table):
            if bid != NONE:
                self.pool.unref(bid)
        seq.sliding_table = []

    def release_after(self, seq, num_blocks: int) -> None:
        """Give back the table's blocks past its first ``num_blocks``."""
        for bid in reversed(seq.sliding_table[num_blocks:]):
            if bid != NONE:
                self.pool.unref(bid)
        del seq.sliding_table[num_blocks:]

    def check_integrity(self, live_seqs) -> None:
        """Ref counts match the live tables, and no table holds a block behind its window."""
        tables = [[b for b in s.sliding_table if b != NONE] for s in live_seqs]
        self.pool.check_integrity(tables)
        for seq in live_seqs:
            lo = self.first_needed(seq.num_computed_tokens)
            assert all(b == NONE for b in seq.sliding_table[:lo]), "a block kept behind the window"
            assert len(seq.sliding_table) <= len(seq.block_table), "sliding table past the table"
