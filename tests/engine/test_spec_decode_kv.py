"""Property test (hypothesis): speculative drafts through the real Scheduler and BlockManager.

The scheduler harness of ``test_scheduler_properties`` drives random arrivals, steps and aborts;
here every running decoding sequence also carries random drafts each step, and so does every
waiting one (drafted with the end of its prompt, as the drafter does), and verification is
replayed as ``spec_decode.Verifier`` does it: a random number of drafts is accepted, a correction
token appended, only the drafts that match the verified tokens count as computed, then
``commit`` and ``release_after``. After every step the ref counts match the live tables (both
pools), every computed position holds KV of its own verified prefix, no prefix-cache block was
written, and at the end every block is free: blocks freed = blocks allocated, no leaked refs.
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_scheduler_properties import Harness

from stencil.engine.block_manager import BlockManager
from stencil.engine.scheduler import Scheduler
from stencil.engine.sliding_blocks import SlidingBlocks
from stencil.engine.spec_decode.verifier import verified_drafts


class SpecHarness(Harness):
    max_drafts: int = 3

    def step(self) -> None:
        for seq in self.sched.running:  # the drafter's job: drafts from a small alphabet
            decoding = seq.num_computed_tokens >= seq.prompt_len and not seq.pending_forks
            room = seq.max_len - seq.num_tokens - 1
            k = min(self.rng.randrange(self.max_drafts + 1), max(room, 0)) if decoding else 0
            seq.spec_token_ids = [self.rng.randrange(4) for _ in range(k)]
        for seq in self.sched.waiting:  # drafts for the step that computes the rest of its prompt
            room = seq.max_len - seq.num_tokens - 1
            k = 0 if seq.pending_forks else min(self.rng.randrange(self.max_drafts + 1), room)
            seq.spec_token_ids = [self.rng.randrange(4) for _ in range(max(k, 0))]
        self.steps += 1
        out = self.sched.schedule()
        self._check_schedule(out)
        self._copy_on_write(out)
        samplers = []
        for s in out.scheduled:
            seq = s.seq
            ctx = seq.token_ids + seq.spec_token_ids
            for p in range(seq.num_computed_tokens, seq.num_computed_tokens + s.num_new_tokens):
                for slot in self._slots(seq, p):
                    self.shadow[slot] = (p, hash(tuple(ctx[: p + 1])))
            if s.samples:
                samplers.append(seq)
        self.sched.after_step(out)
        for seq in samplers:
            drafts, seq.spec_token_ids = seq.spec_token_ids, []
            base = seq.num_tokens
            self._check_kv(seq)
            for t in drafts[: self.rng.randrange(len(drafts) + 1)]:  # accepted drafts
                seq.token_ids.append(t)
            self._sample(seq)  # the correction (or bonus) token
            seq.num_computed_tokens += verified_drafts(seq.token_ids[base:], drafts)
            self.bm.commit(seq)
            self.bm.release_after(seq, seq.num_tokens)
            assert len(seq.block_table) <= self.bm.blocks_for(seq.num_tokens)
        for req in self.requests:
            self.sched.free_finished(req.seqs)
        self.bm.check_integrity(self.live_seqs())
        for seq in self.live_seqs():
            assert seq.num_computed_tokens < seq.num_tokens or seq.fork_of is not None

    def _check_schedule(self, out) -> None:
        """Drafts fit the budget and the table; no written block is shared or prefix-cached."""
        assert out.num_tokens <= self.sched.max_num_batched_tokens
        bs = self.bm.block_size
        for s in out.scheduled:
            seq = s.seq
            end = seq.num_computed_tokens + s.num_new_tokens
            assert end <= seq.num_tokens + len(seq.spec_token_ids) <= seq.max_len
            assert not seq.spec_token_ids or end == seq.num_tokens + len(seq.spec_token_ids)
            assert len(seq.block_table) * bs >= end, "table too short"
            if seq.fork_of is not None or any(f.seq.fork_of is seq for f in out.scheduled):
                continue
            for p in range(seq.num_computed_tokens, end):
                block = self.bm.blocks[seq.block_table[p // bs]]
                assert block.ref_count == 1, "a shared block written (no COW)"
                assert block.hash is None, "a prefix-cached block written"

    def _check_kv(self, seq) -> None:
        """Every verified position holds KV of its own prefix (drafts past it do not count)."""
        for p in range(seq.num_computed_tokens):
            got = self.shadow.get(self._slot(seq, p))
            assert got == (p, hash(tuple(seq.token_ids[: p + 1]))), f"stale KV at {p}"


op_add = st.tuples(
    st.just("add"),
    st.lists(st.integers(0, 3), min_size=1, max_size=10),
    st.integers(1, 16),
    st.sampled_from([1, 1, 2]),
)
op_step = st.tuples(st.just("step"), st.integers(1, 4))
op_abort = st.tuples(st.just("abort"), st.integers(0, 1000))
ops = st.lists(st.one_of(op_add, op_add, op_step, op_step, op_abort), min_size=2, max_size=30)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    program=ops,
    block_size=st.sampled_from([1, 2, 4]),
    capacity=st.integers(16, 48),
    budget=st.sampled_from([2, 5, 64]),
    prefix=st.booleans(),
    seed=st.integers(0, 2**16),
    window=st.sampled_from([None, None, 2, 5]),
)
def test_drafts_release_every_block(program, block_size, capacity, budget, prefix, seed, window):
    num_blocks = max(capacity // block_size, 2)
    sliding = None
    if window is not None:
        need = -(-(window - 1 + budget) // block_size) + 2
        sliding = SlidingBlocks(max(need, num_blocks // 2), block_size, window)
    bm = BlockManager(num_blocks, block_size, enable_prefix_caching=prefix, sliding=sliding)
    h = SpecHarness(bm, Scheduler(bm, 4, budget), random.Random(seed), 0.1)
    for op in program:
        if op[0] == "add":
            h.add(op[1], op[2], op[3])
        elif op[0] == "step":
            for _ in range(op[1]):
                h.step()
        else:
            h.abort(op[1])
    for _ in range(4000):
        if all(r.finished for r in h.requests):
            break
        h.step()
    assert all(r.finished for r in h.requests), [
        (s.seq_id, s.status, s.num_tokens, s.num_computed_tokens, s.max_len, len(s.block_table))
        for s in h.live_seqs()
    ] + [len(h.sched.waiting), bm.num_free_blocks, num_blocks]
    bm.check_integrity([])
    assert bm.num_free_blocks == num_blocks
    if sliding is not None:
        assert sliding.pool.num_free_blocks == sliding.pool.num_blocks
