"""A pool of KV blocks: ref counts, an LRU free list, and the prefix-cache index of full blocks
(a freed block stays matchable by its hash until it is reused). Pure Python (no torch)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass


@dataclass(slots=True)
class Block:
    block_id: int
    ref_count: int = 0
    hash: int | None = None
    tokens: tuple[int, ...] | None = None


class BlockPool:
    def __init__(self, num_blocks: int) -> None:
        self.num_blocks = num_blocks
        self.blocks = [Block(i) for i in range(num_blocks)]
        self.free_ids: OrderedDict[int, None] = OrderedDict((i, None) for i in range(num_blocks))
        self.hash_to_block: dict[int, int] = {}

    @property
    def num_free_blocks(self) -> int:
        return len(self.free_ids)

    def pop_free(self) -> int:
        """The least recently freed block (its prefix-cache entry dropped), with one reference."""
        bid, _ = self.free_ids.popitem(last=False)
        block = self.blocks[bid]
        if block.hash is not None:
            del self.hash_to_block[block.hash]
            block.hash = block.tokens = None
        block.ref_count = 1
        return bid

    def ref(self, bid: int) -> None:
        block = self.blocks[bid]
        if block.ref_count == 0:
            del self.free_ids[bid]
        block.ref_count += 1

    def unref(self, bid: int) -> None:
        block = self.blocks[bid]
        block.ref_count -= 1
        assert block.ref_count >= 0
        if block.ref_count == 0:
            self.free_ids[bid] = None

    def publish(self, bid: int, h: int, tokens: tuple[int, ...] | None = None) -> None:
        """Index a full block under its chain hash (unless it or an equal block already is)."""
        block = self.blocks[bid]
        if block.hash is None and h not in self.hash_to_block:
            block.hash, block.tokens = h, tokens
            self.hash_to_block[h] = bid

    def check_integrity(self, tables) -> None:
        """Every block's ref count equals the number of ``tables`` that hold it; no leaks."""
        counts = [0] * self.num_blocks
        for table in tables:
            for bid in table:
                counts[bid] += 1
        for block in self.blocks:
            assert block.ref_count == counts[block.block_id], f"block {block.block_id} ref mismatch"
            assert (block.ref_count == 0) == (block.block_id in self.free_ids), "free list mismatch"
        for h, bid in self.hash_to_block.items():
            assert self.blocks[bid].hash == h, "hash index mismatch"
