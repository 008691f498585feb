"""Paged KV-cache bookkeeping: fixed-size blocks, ref counts, prefix caching, copy-on-write.

Pure Python (no torch). Only the scheduler calls it. A block is *cached* once every one of its
slots holds a computed token; its hash chains the previous block's hash with its own token ids,
so equal prefixes map to equal blocks. Freed cached blocks stay matchable until reused (LRU).
A model with sliding-window layers keeps their blocks in a second pool (``SlidingBlocks``) that
frees what leaves the window; the queries here cover both pools.
"""

from __future__ import annotations

from stencil.engine.block_pool import Block, BlockPool
from stencil.engine.sliding_blocks import SlidingBlocks

__all__ = ["Block", "BlockManager", "chain_hash"]


def chain_hash(parent: int | None, tokens: tuple[int, ...]) -> int:
    """A full block's prefix-cache key: the previous block's key chained with its own tokens."""
    return hash((parent, tokens))


class BlockManager:
    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        enable_prefix_caching: bool = True,
        sliding: SlidingBlocks | None = None,
    ) -> None:
        self.block_size = block_size
        self.num_blocks = num_blocks
        self.enable_prefix_caching = enable_prefix_caching
        self.pool = BlockPool(num_blocks)
        self.blocks = self.pool.blocks
        self.free_ids = self.pool.free_ids
        self.hash_to_block = self.pool.hash_to_block
        self.sliding = sliding
        self.prefix_hits = 0  # tokens served from the cache, for metrics

    # ---- queries -------------------------------------------------------------------------
    @property
    def num_free_blocks(self) -> int:
        return len(self.free_ids)

    def usage(self) -> float:
        return 1.0 - self.num_free_blocks / self.num_blocks

    def blocks_for(self, num_tokens: int) -> int:
        return -(-num_tokens // self.block_size)

    def can_allocate(self, num_blocks: int) -> bool:
        return num_blocks <= self.num_free_blocks

    def match_prefix(self, token_ids: list[int]) -> list[int]:
        """Ids of cached blocks holding a prefix of ``token_ids`` (leaving >= 1 token to compute)."""
        if not self.enable_prefix_caching:
            return []
        matched: list[int] = []
        parent = None
        limit = (len(token_ids) - 1) // self.block_size
        for i in range(limit):
            tokens = tuple(token_ids[i * self.block_size : (i + 1) * self.block_size])
            h = chain_hash(parent, tokens)
            bid = self.hash_to_block.get(h)
            if bid is None or self.blocks[bid].tokens != tokens:
                break
            matched.append(bid)
            parent = h
        if self.sliding is not None:
            matched = matched[: self.sliding.usable_prefix(self._hashes(matched))]
        return matched

    def can_fit(self, seq, num_tokens: int) -> bool:
        """Whether both pools have the blocks ``allocate(seq, num_tokens)`` takes."""
        if not self.can_allocate(self.blocks_needed(seq, num_tokens)):
            return False
        sliding = self.sliding
        return (
            sliding is None
            or sliding.blocks_needed(seq, num_tokens) <= sliding.pool.num_free_blocks
        )

    def can_admit(self, matched: list[int], num_tokens: int) -> bool:
        """Whether a fresh sequence fits with the ``matched`` prefix and ``num_tokens`` slots."""
        need = self.blocks_for(num_tokens) - len(matched)
        if not self.can_allocate(need + sum(self.blocks[b].ref_count == 0 for b in matched)):
            return False
        sliding = self.sliding
        if sliding is None:
            return True
        return sliding.admit_need(self._hashes(matched), num_tokens) <= sliding.pool.num_free_blocks

    def _hashes(self, matched: list[int]) -> list[int]:
        return [self.blocks[b].hash for b in matched]

    # ---- mutations -----------------------------------------------------------------------
    def take_prefix(self, seq, matched: list[int]) -> None:
        """Give a fresh sequence the matched cached blocks; its computation resumes after them."""
        assert not seq.block_table
        for bid in matched:
            self._ref(bid)
        seq.block_table = list(matched)
        if self.sliding is not None:
            self.sliding.take_prefix(seq, self._hashes(matched))
        seq.num_hashed_blocks = len(matched)
        seq.num_computed_tokens = seq.num_cached_tokens = len(matched) * self.block_size
        self.prefix_hits += seq.num_cached_tokens

    def allocate(self, seq, num_tokens: int) -> list[tuple[int, int]]:
        """Make ``seq``'s table cover ``num_tokens`` slots. Returns (src, dst) block copies owed
        for copy-on-write of a shared, partly filled block that the sequence is about to write.
        The caller checks capacity first (``blocks_needed``)."""
        copies = []
        start = seq.num_computed_tokens // self.block_size
        if start < len(seq.block_table) and seq.num_computed_tokens % self.block_size:
            bid = seq.block_table[start]
            if self.blocks[bid].ref_count > 1:
                new = self._pop_free()
                copies.append((bid, new))
                self._unref(bid)
                seq.block_table[start] = new
        while len(seq.block_table) < self.blocks_for(num_tokens):
            seq.block_table.append(self._pop_free())
        return copies

    def allocate_sliding(self, seq, num_tokens: int) -> list[tuple[int, int]]:
        """``allocate`` for the sliding-window pool (nothing without one)."""
        return [] if self.sliding is None else self.sliding.allocate(seq, num_tokens)

    def blocks_needed(self, seq, num_tokens: int) -> int:
        need = max(self.blocks_for(num_tokens) - len(seq.block_table), 0)
        start = seq.num_computed_tokens // self.block_size
        if (
            start < len(seq.block_table)
            and seq.num_computed_tokens % self.block_size
            and self.blocks[seq.block_table[start]].ref_count > 1
        ):
            need += 1
        return need

    def commit(self, seq) -> None:
        """Register the hashes of the sequence's blocks that are now fully computed. A block's
        chain hash is computed once per sequence (``seq.block_hashes``, by token content), and the
        table's leading blocks that already hold a hash are skipped (``seq.num_hashed_blocks``):
        a step costs the blocks it filled, not the whole context."""
        if self.enable_prefix_caching:
            self._commit_hashes(seq)
        if self.sliding is not None:
            hashes = seq.block_hashes if self.enable_prefix_caching else None
            self.sliding.commit(seq, hashes)

    def _commit_hashes(self, seq) -> None:
        bs = self.block_size
        full = min(seq.num_computed_tokens, seq.num_tokens) // bs
        hashes = seq.block_hashes
        for i in range(len(hashes), full):
            tokens = tuple(seq.token_ids[i * bs : (i + 1) * bs])
            hashes.append(chain_hash(hashes[i - 1] if i else None, tokens))
        table, done = seq.block_table, seq.num_hashed_blocks
        for i in range(done, full):
            block = self.blocks[table[i]]
            if block.hash is None and hashes[i] not in self.hash_to_block:
                block.hash, block.tokens = hashes[i], tuple(seq.token_ids[i * bs : (i + 1) * bs])
                self.hash_to_block[hashes[i]] = block.block_id
            if block.hash is not None and i == done:  # a live block keeps its hash
                done += 1
        seq.num_hashed_blocks = done

    def fork(self, parent, child) -> None:
        """``child`` shares all of ``parent``'s blocks (copy-on-write on its first write)."""
        for bid in parent.block_table:
            self._ref(bid)
        child.block_table = list(parent.block_table)
        if self.sliding is not None:
            self.sliding.fork(parent, child)
        child.num_hashed_blocks = 0
        child.num_computed_tokens = parent.num_computed_tokens

    def free(self, seq) -> None:
        for bid in reversed(seq.block_table):
            self._unref(bid)
        seq.block_table = []
        if self.sliding is not None:
            self.sliding.free(seq)
        seq.num_hashed_blocks = 0
        seq.num_computed_tokens = 0

    def release_after(self, seq, num_tokens: int) -> None:
        """Give back the table's blocks past ``num_tokens`` slots in both pools (the KV of
        rejected speculative drafts; such blocks never hold a computed full block, so no hash)."""
        keep = self.blocks_for(num_tokens)
        for bid in reversed(seq.block_table[keep:]):
            self._unref(bid)
        del seq.block_table[keep:]
        if self.sliding is not None:
            self.sliding.release_after(seq, keep)

    def check_integrity(self, live_seqs) -> None:
        """Every block's ref count equals the number of live tables that hold it; no leaks; no
        sliding-window block kept behind its window."""
        self.pool.check_integrity([seq.block_table for seq in live_seqs])
        if self.sliding is not None:
            self.sliding.check_integrity(live_seqs)

    # ---- internals -----------------------------------------------------------------------
    def _pop_free(self) -> int:
        return self.pool.pop_free()

    def _ref(self, bid: int) -> None:
        self.pool.ref(bid)

    def _unref(self, bid: int) -> None:
        self.pool.unref(bid)
