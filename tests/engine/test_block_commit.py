"""BlockManager.commit registers exactly the blocks a from-scratch hash chain names (the
incremental per-sequence hashes change only the cost), and retries a block whose hash another
block held once that block is gone."""

from __future__ import annotations

import random

import pytest
import torch

from stencil.engine.block_manager import BlockManager
from stencil.engine.sampling_params import SamplingParams
from stencil.engine.sequence import Sequence


def _seq(seq_id: int, tokens: list[int]) -> Sequence:
    params = SamplingParams(max_tokens=1000)
    return Sequence(
        seq_id, f"r{seq_id}", 0, list(tokens), len(tokens), params, 10_000, torch.Generator()
    )


def _chain(tokens: list[int], bs: int, full: int) -> list[int]:
    """The oracle: every full block's chain hash, recomputed from the start."""
    out, parent = [], None
    for i in range(full):
        parent = hash((parent, tuple(tokens[i * bs : (i + 1) * bs])))
        out.append(parent)
    return out


def _grow(bm: BlockManager, seq: Sequence, n: int, rng: random.Random) -> None:
    """Compute ``n`` more tokens (appending sampled ones past the prompt), committing each step."""
    for _ in range(n):
        if seq.num_computed_tokens == seq.num_tokens:
            seq.token_ids.append(rng.randrange(50))
        bm.allocate(seq, seq.num_computed_tokens + 1)
        seq.num_computed_tokens += 1
        bm.commit(seq)


@pytest.mark.parametrize("bs, prompt, steps", [(4, 3, 40), (4, 9, 17), (16, 40, 70), (1, 2, 9)])
def test_commit_registers_the_chain(bs, prompt, steps):
    rng = random.Random(bs * 100 + prompt)
    bm = BlockManager(64, bs)
    seq = _seq(1, [rng.randrange(50) for _ in range(prompt)])
    _grow(bm, seq, steps, rng)
    full = seq.num_computed_tokens // bs
    want = {h: seq.block_table[i] for i, h in enumerate(_chain(seq.token_ids, bs, full))}
    assert bm.hash_to_block == want
    for i in range(full):
        assert bm.blocks[seq.block_table[i]].tokens == tuple(seq.token_ids[i * bs : (i + 1) * bs])
    bm.check_integrity([seq])
    assert bm.match_prefix(seq.token_ids + [0]) == seq.block_table[:full]


def test_commit_retries_a_hash_held_by_a_freed_block():
    bs, tokens = 4, list(range(12))
    bm = BlockManager(8, bs)
    a, b = _seq(1, tokens), _seq(2, tokens)
    for s in (a, b):  # both computed before either committed: no prefix shared
        bm.allocate(s, len(tokens))
        s.num_computed_tokens = len(tokens)
    bm.commit(a)
    bm.commit(b)
    assert set(bm.hash_to_block.values()) == set(a.block_table)
    bm.free(a)
    for _ in range(bm.num_free_blocks):  # reuse every free block: a's hashes are dropped
        bm._pop_free()
    assert not bm.hash_to_block
    bm.commit(b)
    assert set(bm.hash_to_block.values()) == set(b.block_table)


def test_preempted_sequence_rematches_its_blocks():
    bs = 4
    bm = BlockManager(16, bs)
    rng = random.Random(0)
    seq = _seq(1, [rng.randrange(50) for _ in range(10)])
    _grow(bm, seq, 14, rng)
    table = list(seq.block_table)
    bm.free(seq)  # preemption: the blocks stay cached
    matched = bm.match_prefix(seq.token_ids)
    assert matched == table[: (seq.num_tokens - 1) // bs]
    bm.take_prefix(seq, matched)
    _grow(bm, seq, seq.num_tokens - seq.num_computed_tokens + 5, rng)
    full = seq.num_computed_tokens // bs
    want = {h: seq.block_table[i] for i, h in enumerate(_chain(seq.token_ids, bs, full))}
    assert {h: b for h, b in bm.hash_to_block.items() if h in want} == want
    bm.check_integrity([seq])
