"""Property tests (hypothesis) for BlockManager + Scheduler, without a model.

A fake engine loop drives ``Scheduler.schedule()`` / ``after_step()`` / ``finish()`` with random
adds (n > 1 via ``pending_forks``), aborts, EOS-like stops and sampled tokens. A shadow KV cache
records, for every slot written, the position and the exact token prefix it was computed from, and
applies the scheduler's copy-on-write copies; whenever a sequence samples, every one of its
positions must hold its own prefix. With a sliding window, a second shadow follows the sliding
pool: every position inside the sampling query's window must hold its own prefix there too, while
blocks behind it are freed (``check_integrity``). After every step ``check_integrity`` holds; at
the end every request has finished within a bound and every block of both pools is free.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import torch
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from stencil.engine.block_manager import BlockManager
from stencil.engine.sampling_params import SamplingParams
from stencil.engine.scheduler import Scheduler
from stencil.engine.sequence import Sequence, SequenceStatus
from stencil.engine.sliding_blocks import SlidingBlocks


@dataclass
class FakeRequest:
    rid: str
    seqs: list[Sequence]
    aborted: bool = False

    @property
    def finished(self) -> bool:
        return all(s.is_finished for s in self.seqs)


@dataclass
class Harness:
    bm: BlockManager
    sched: Scheduler
    rng: random.Random
    eos_prob: float
    requests: list[FakeRequest] = field(default_factory=list)
    shadow: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)
    next_id: int = 0
    steps: int = 0
    copies: int = 0
    check_max_seqs: bool = False  # see test_max_num_seqs_counts_pending_forks

    # ---- the engine's side ---------------------------------------------------------------
    def add(self, prompt: list[int], max_tokens: int, n: int) -> bool:
        if self.bm.blocks_for(len(prompt) + max_tokens) > self.bm.num_blocks:
            return False  # the engine rejects this before scheduling
        if n > self.sched.max_num_seqs:
            # can never be admitted (all n siblings must fit at once); the engine should reject
            # it up front -- see test_engine_robustness::test_n_above_max_num_seqs
            return False
        params = SamplingParams(n=n, max_tokens=max_tokens, temperature=0)
        rid = f"r{len(self.requests)}"
        seqs = []
        for i in range(n):
            self.next_id += 1
            seqs.append(
                Sequence(
                    self.next_id,
                    rid,
                    i,
                    list(prompt),
                    len(prompt),
                    params,
                    len(prompt) + max_tokens,
                    torch.Generator(),
                )
            )
        seqs[0].pending_forks = seqs[1:]
        self.requests.append(FakeRequest(rid, seqs))
        self.sched.add(seqs[0])
        return True

    def abort(self, k: int) -> None:
        live = [r for r in self.requests if not r.finished]
        if not live:
            return
        req = live[k % len(live)]
        req.aborted = True
        for s in req.seqs:
            if not s.is_finished:
                s.finish("abort")
            self.sched.finish(s)

    def step(self) -> None:
        self.steps += 1
        out = self.sched.schedule()
        self._check_schedule(out)
        self.copies += len(out.copies) + len(out.sliding_copies)
        self._copy_on_write(out)
        samplers = []
        for s in out.scheduled:
            seq = s.seq
            start = seq.num_computed_tokens
            for p in range(start, start + s.num_new_tokens):
                for slot in self._slots(seq, p):
                    self.shadow[slot] = (p, hash(tuple(seq.token_ids[: p + 1])))
            if s.samples:
                samplers.append(seq)
        self.sched.after_step(out)
        for seq in samplers:
            self._check_kv(seq)
            self._sample(seq)
        for req in self.requests:
            self.sched.free_finished(req.seqs)
        self.bm.check_integrity(self.live_seqs())

    def _copy_on_write(self, out) -> None:
        """Replay the step's block copies in the shadow KV, before the step's writes."""
        for pool, copies in (("full", out.copies), ("sliding", out.sliding_copies)):
            for src, dst in copies:
                for off in range(self.bm.block_size):
                    if (pool, src, off) in self.shadow:
                        self.shadow[(pool, dst, off)] = self.shadow[(pool, src, off)]
                    else:
                        self.shadow.pop((pool, dst, off), None)

    def _sample(self, seq: Sequence) -> None:
        token = self.rng.randrange(8)  # a small alphabet, so prefixes repeat
        seq.token_ids.append(token)
        if self.rng.random() < self.eos_prob:
            seq.finish("stop")
        elif seq.num_tokens >= seq.max_len:
            seq.finish("length")

    # ---- invariants ----------------------------------------------------------------------
    def live_seqs(self) -> list[Sequence]:
        return [s for r in self.requests for s in r.seqs if not s.is_finished]

    def _slot(self, seq: Sequence, pos: int, pool: str = "full") -> tuple[str, int, int]:
        bs = self.bm.block_size
        table = seq.block_table if pool == "full" else seq.sliding_table
        assert table[pos // bs] >= 0, f"position {pos} has no {pool} block"
        return pool, table[pos // bs], pos % bs

    def _slots(self, seq: Sequence, pos: int) -> list[tuple[str, int, int]]:
        slots = [self._slot(seq, pos)]
        if self.bm.sliding is not None:
            slots.append(self._slot(seq, pos, "sliding"))
        return slots

    def _check_schedule(self, out) -> None:
        seqs = [s.seq for s in out.scheduled]
        assert len({id(s) for s in seqs}) == len(seqs), "a sequence scheduled twice in one step"
        assert out.num_tokens <= self.sched.max_num_batched_tokens
        if self.check_max_seqs:
            assert len(self.sched.running) <= self.sched.max_num_seqs
        for s in out.scheduled:
            seq = s.seq
            assert not seq.is_finished, "a finished sequence was scheduled"
            assert seq.status == SequenceStatus.RUNNING
            assert seq in self.sched.running
            if s.num_new_tokens == 0:
                assert seq.fork_of is not None, "an empty schedule entry that is not a fork"
                continue
            end = seq.num_computed_tokens + s.num_new_tokens
            assert end <= seq.num_tokens
            assert len(seq.block_table) * self.bm.block_size >= end, "table too short"
            written = {
                seq.block_table[p // self.bm.block_size]
                for p in range(seq.num_computed_tokens, end)
            }
            # siblings forked from ``seq`` in this very step share its blocks on purpose: they
            # read the KV that ``seq`` writes now
            forks = [f.seq for f in out.scheduled if f.seq.fork_of is seq]
            for bid in written:
                block = self.bm.blocks[bid]
                sharers = 1 + sum(bid in f.block_table for f in forks)
                assert block.ref_count == sharers, f"block {bid} written while shared (no COW)"
                assert block.hash is None, f"block {bid} written while in the prefix cache"
        for seq in out.preempted:
            assert not seq.block_table and seq.status == SequenceStatus.WAITING

    def _check_kv(self, seq: Sequence) -> None:
        """Every computed position of ``seq`` holds KV computed from ``seq``'s own prefix."""
        assert seq.num_computed_tokens == seq.num_tokens
        for p in range(seq.num_tokens):
            got = self.shadow.get(self._slot(seq, p))
            want = (p, hash(tuple(seq.token_ids[: p + 1])))
            assert got == want, f"seq {seq.seq_id} position {p}: stale or foreign KV"
        if self.bm.sliding is not None:  # what the next query sees of its window (sliding pool)
            for p in range(max(seq.num_tokens - self.bm.sliding.window + 1, 0), seq.num_tokens):
                got = self.shadow.get(self._slot(seq, p, "sliding"))
                want = (p, hash(tuple(seq.token_ids[: p + 1])))
                assert got == want, f"seq {seq.seq_id} position {p}: stale sliding-window KV"


PREFIXES = [[], [1, 2, 3, 4, 5, 6, 7, 0], [1, 2, 3, 4, 1, 2, 3, 4, 5]]

op_add = st.tuples(
    st.just("add"),
    st.sampled_from(range(len(PREFIXES))),
    st.lists(st.integers(0, 7), min_size=1, max_size=12),
    st.integers(1, 16),  # max_tokens
    st.sampled_from([1, 1, 2, 3]),  # n
)
op_step = st.tuples(st.just("step"), st.integers(1, 4))
op_abort = st.tuples(st.just("abort"), st.integers(0, 1000))
ops = st.tuples(
    st.lists(op_add, min_size=2, max_size=6),  # a burst of arrivals, then anything
    st.lists(st.one_of(op_add, op_step, op_step, op_abort), max_size=30),
).map(lambda t: t[0] + t[1])


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@example(  # a preempted fork recomputes its prompt: its kept block hashes ran past the computed
    # blocks, and the sliding pool published a partly written block (stale KV on the next hit)
    program=[("add", 0, [0], 1, 1), ("add", 0, [0, 0], 12, 1), ("add", 1, [0, 0], 9, 2)],
    block_size=4,
    capacity=28,
    max_num_seqs=3,
    budget=3,
    decode_prefill=None,
    prefix=True,
    eos_prob=0.0,
    seed=0,
    window=8,
)
@given(
    program=ops,
    block_size=st.sampled_from([1, 2, 4, 8]),
    capacity=st.integers(16, 64),  # KV slots: block_size * num_blocks
    max_num_seqs=st.integers(1, 6),
    budget=st.sampled_from([1, 3, 8, 64]),
    decode_prefill=st.sampled_from([None, 1, 2, 5]),
    prefix=st.booleans(),
    eos_prob=st.sampled_from([0.0, 0.1]),
    seed=st.integers(0, 2**16),
    window=st.sampled_from([None, None, 1, 3, 8]),
)
def test_any_interleaving_keeps_integrity_and_finishes(
    program, block_size, capacity, max_num_seqs, budget, decode_prefill, prefix, eos_prob, seed,
    window,
):  # fmt: skip
    num_blocks = max(capacity // block_size, 2)
    sliding = None
    if window is not None:  # room for one sequence's window and a step's tokens, at least
        need = -(-(window - 1 + budget) // block_size) + 2
        sliding = SlidingBlocks(max(need, num_blocks // 2), block_size, window)
    bm = BlockManager(num_blocks, block_size, enable_prefix_caching=prefix, sliding=sliding)
    sched = Scheduler(bm, max_num_seqs, budget, decode_prefill_budget=decode_prefill)
    h = Harness(bm, sched, random.Random(seed), eos_prob)
    work = 0
    for op in program:
        if op[0] == "add":
            _, pi, tail, max_tokens, n = op
            prompt = PREFIXES[pi] + tail
            if h.add(prompt, max_tokens, n):
                work += (len(prompt) + max_tokens) * n
        elif op[0] == "step":
            for _ in range(op[1]):
                h.step()
        else:
            h.abort(op[1])
    # drain: every request must finish within a generous bound (no starvation / livelock)
    bound = 4 * work * max(1, num_blocks) + 50
    start = h.steps
    while any(not r.finished for r in h.requests):
        assert h.steps - start <= bound, (
            f"not finished after {bound} steps: "
            f"{[(s.seq_id, s.status, s.num_tokens) for s in h.live_seqs()]}"
        )
        h.step()
    assert not h.sched.running and not h.sched.waiting
    event(f"preemptions>0: {h.sched.metrics.num_preemptions_total > 0}")
    event(f"requests: {min(len(h.requests), 4)}")
    event(f"prefix hits>0: {bm.prefix_hits > 0}")
    event(f"cow copies>0: {h.copies > 0}")
    bm.check_integrity([])
    assert bm.num_free_blocks == bm.num_blocks, "blocks leaked"
    if sliding is not None:
        event(f"sliding pool smaller than the full one: {sliding.pool.num_blocks < num_blocks}")
        assert sliding.pool.num_free_blocks == sliding.pool.num_blocks, "sliding blocks leaked"
    for r in h.requests:
        for s in r.seqs:
            assert s.is_finished and not s.block_table
            if not r.aborted and s.finish_reason == "length":
                assert s.num_tokens == s.max_len


def test_fork_siblings_share_prompt_blocks_then_copy_on_write():
    """n = 3 over a 6-token prompt (block 4): the full block is shared by all three, the partial
    one copied on each sibling's first write."""
    bm = BlockManager(16, 4)
    h = Harness(bm, Scheduler(bm, 8, 64), random.Random(0), 0.0)
    assert h.add([1, 2, 3, 4, 5, 6], 4, 3)
    h.step()  # prefill + fork
    seqs = h.requests[0].seqs
    assert all(s.status == SequenceStatus.RUNNING for s in seqs)
    first = {s.block_table[0] for s in seqs}
    assert len(first) == 1 and bm.blocks[first.pop()].ref_count == 3
    h.step()  # first decode: siblings diverge in block 1
    assert len({s.block_table[1] for s in seqs}) == 3
    assert len({s.block_table[0] for s in seqs}) == 1
    while not h.requests[0].finished:
        h.step()
    assert bm.num_free_blocks == bm.num_blocks


def test_prefix_cache_hit_then_eviction_reuses_blocks():
    bm = BlockManager(6, 2)
    h = Harness(bm, Scheduler(bm, 4, 64), random.Random(1), 0.0)
    prompt = [1, 2, 3, 4, 5, 6, 7]
    assert h.add(prompt, 2, 1)
    while not h.requests[-1].finished:
        h.step()
    assert bm.match_prefix(prompt) != []  # freed blocks stay matchable
    assert h.add(prompt, 2, 1)
    h.step()
    assert h.requests[-1].seqs[0].num_cached_tokens == 6
    while not h.requests[-1].finished:
        h.step()
    # an unrelated long request must be able to evict every cached block
    assert h.add([0] * 9, 3, 1)
    while not h.requests[-1].finished:
        h.step()
    assert bm.num_free_blocks == bm.num_blocks
    bm.check_integrity([])


def test_max_num_seqs_counts_pending_forks():
    """max_num_seqs = 2: an n = 2 request and an n = 1 request must not run 3 sequences at once.

    The admission check counts the pending forks of the sequence being admitted, but not those of
    sequences already admitted (in this step, or earlier while their prefill is chunked)."""
    bm = BlockManager(16, 4)
    h = Harness(bm, Scheduler(bm, 2, 64), random.Random(0), 0.0, check_max_seqs=True)
    assert h.add([1, 2, 3], 2, 2)
    assert h.add([4, 5, 6], 2, 1)
    while any(not r.finished for r in h.requests):
        h.step()
    assert bm.num_free_blocks == bm.num_blocks


def test_decode_prefill_budget_spreads_a_prompt_while_others_decode():
    """While a sequence decodes, a new 20-token prompt is prefilled 4 tokens a step and the decode
    advances every step; with nothing decoding, a prompt takes the whole budget at once."""
    bm = BlockManager(64, 4, enable_prefix_caching=False)
    h = Harness(bm, Scheduler(bm, 4, 64, decode_prefill_budget=4), random.Random(0), 0.0)

    def step() -> dict[str, int]:
        out = h.sched.schedule()
        sampling = [s.seq for s in out.scheduled if s.samples]
        h.sched.after_step(out)
        for seq in sampling:
            h._sample(seq)
        return {s.seq.request_id: s.num_new_tokens for s in out.scheduled}

    h.add(list(range(10)), 40, 1)
    assert step() == {"r0": 10}  # nothing decodes yet: the whole prompt at once
    h.add(list(range(100, 120)), 4, 1)
    steps = [step() for _ in range(6)]
    assert [s["r0"] for s in steps] == [1] * 6  # the running stream decodes every step
    assert [s.get("r1") for s in steps] == [4, 4, 4, 4, 4, 1]  # then r1 decodes too
