"""Continuous batching at step granularity over the paged KV cache.

Each step: running sequences first (decode, or the next chunk of a prefill), then waiting ones
FCFS, within ``max_num_seqs`` and the token budget ``max_num_batched_tokens``. A step that decodes
carries at most ``decode_prefill_budget`` prompt tokens (None: the whole budget), so a burst of
new prompts is spread over several steps instead of stalling every running stream for one long
step (inter-token latency vs time to first token). When blocks run out, the most recently admitted
running sequence is preempted (freed; recomputed later).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from stencil.engine.block_manager import BlockManager
from stencil.engine.metrics import EngineMetrics
from stencil.engine.sequence import Sequence, SequenceStatus


@dataclass(slots=True)
class ScheduledSeq:
    seq: Sequence
    num_new_tokens: int  # tokens to compute this step (0 for a fork sharing its parent's row)

    @property
    def samples(self) -> bool:
        """Whether this step ends at the sequence's last token, so it samples the next one."""
        if self.seq.fork_of is not None:
            return True
        if self.seq.pooler is not None:
            return False
        return self.seq.num_computed_tokens + self.num_new_tokens >= self.seq.num_tokens


@dataclass(slots=True)
class SchedulerOutput:
    scheduled: list[ScheduledSeq] = field(default_factory=list)
    copies: list[tuple[int, int]] = field(default_factory=list)  # (src, dst) block copies
    sliding_copies: list[tuple[int, int]] = field(default_factory=list)  # in the sliding pool
    preempted: list[Sequence] = field(default_factory=list)

    @property
    def num_tokens(self) -> int:
        return sum(s.num_new_tokens for s in self.scheduled)


class Scheduler:
    def __init__(
        self,
        block_manager: BlockManager,
        max_num_seqs: int,
        max_num_batched_tokens: int,
        metrics: EngineMetrics | None = None,
        decode_prefill_budget: int | None = None,
    ) -> None:
        self.bm = block_manager
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.decode_prefill_budget = decode_prefill_budget
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.metrics = metrics if metrics is not None else EngineMetrics()

    def add(self, seq: Sequence) -> None:
        seq.status = SequenceStatus.WAITING
        self.waiting.append(seq)

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def schedule(self) -> SchedulerOutput:
        out = SchedulerOutput()
        budget = self.max_num_batched_tokens
        prefill = budget
        if self.decode_prefill_budget is not None and any(map(_decoding, self.running)):
            prefill = min(budget, self.decode_prefill_budget)
        budget, prefill = self._schedule_running(out, budget, prefill)
        if not out.preempted:
            self._schedule_waiting(out, min(budget, prefill))
        for s in list(out.scheduled):
            if s.seq.pending_forks and s.samples:
                self._fork(s.seq, out)
        return out

    def _schedule_running(self, out: SchedulerOutput, budget: int, prefill: int) -> tuple[int, int]:
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            pending = seq.num_tokens - seq.num_computed_tokens
            n = min(pending + len(seq.spec_token_ids), budget)
            if not _decoding(seq):
                n = min(n, prefill)
                if n <= 0:  # over this step's prefill budget: the next step continues it
                    i += 1
                    continue
                prefill -= n
            del seq.spec_token_ids[max(n - pending, 0) :]  # drafts cut to the budget
            while not self.bm.can_fit(seq, seq.num_computed_tokens + n):
                if seq.spec_token_ids:  # drop the drafts before preempting anyone
                    n -= len(seq.spec_token_ids)
                    seq.spec_token_ids = []
                    continue
                victim = self.running[-1]
                self._preempt(victim, out)
                if victim is seq:
                    return budget, prefill
            self._allocate(out, seq, seq.num_computed_tokens + n)
            out.scheduled.append(ScheduledSeq(seq, n))
            budget -= n
            i += 1
        return budget, prefill

    def _schedule_waiting(self, out: SchedulerOutput, budget: int) -> None:
        while self.waiting and budget > 0:
            seq = self.waiting[0]
            if self._num_seqs_committed() + 1 + len(seq.pending_forks) > self.max_num_seqs:
                break
            fresh = not seq.block_table and seq.pooler is None  # pooling needs every hidden state
            matched = self.bm.match_prefix(seq.token_ids) if fresh else []
            start = len(matched) * self.bm.block_size
            n = min(seq.num_tokens - start, budget)
            del seq.spec_token_ids[budget - n :]  # drafts with the prompt's end, within budget
            drafts = len(seq.spec_token_ids)
            if drafts and self.bm.can_admit(matched, start + n + drafts):
                n += drafts
            else:  # no drafts, or room for the prompt only (or not even that)
                seq.spec_token_ids = []
                if not self.bm.can_admit(matched, start + n):
                    break
            self.waiting.popleft()
            self.bm.take_prefix(seq, matched)
            self._allocate(out, seq, seq.num_computed_tokens + n)
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            out.scheduled.append(ScheduledSeq(seq, n))
            budget -= n

    def _allocate(self, out: SchedulerOutput, seq: Sequence, num_tokens: int) -> None:
        out.copies += self.bm.allocate(seq, num_tokens)
        out.sliding_copies += self.bm.allocate_sliding(seq, num_tokens)

    def _num_seqs_committed(self) -> int:
        """Running sequences plus the siblings that admitted parents will fork."""
        return len(self.running) + sum(len(s.pending_forks) for s in self.running)

    def _fork(self, parent: Sequence, out: SchedulerOutput) -> None:
        """Siblings of an n > 1 request share the parent's prompt blocks and logits row."""
        for child in parent.pending_forks:
            self.bm.fork(parent, child)
            child.fork_of = parent
            child.status = SequenceStatus.RUNNING
            self.running.append(child)
            out.scheduled.append(ScheduledSeq(child, 0))
        parent.pending_forks = []

    def _preempt(self, seq: Sequence, out: SchedulerOutput) -> None:
        self.running.remove(seq)
        self.bm.free(seq)
        seq.spec_token_ids = []
        seq.status = SequenceStatus.WAITING
        self.waiting.appendleft(seq)
        self.metrics.num_preemptions_total += 1
        out.preempted.append(seq)

    def after_step(self, out: SchedulerOutput) -> None:
        """Advance computed-token counts and publish newly full blocks to the prefix cache
        (speculative drafts count once verified, in ``spec_decode.Verifier``)."""
        for s in out.scheduled:
            if s.seq.fork_of is not None:
                s.seq.num_computed_tokens = s.seq.fork_of.num_computed_tokens
                s.seq.fork_of = None
            else:
                s.seq.num_computed_tokens += s.num_new_tokens - len(s.seq.spec_token_ids)
            self.bm.commit(s.seq)

    def free_finished(self, seqs: Iterable[Sequence]) -> list[Sequence]:
        """Free the finished sequences among ``seqs`` that still hold blocks or a running slot
        (the one rule for releasing finished work); returns them."""
        freed = [s for s in seqs if s.is_finished and (s.block_table or s in self.running)]
        for seq in freed:
            self.finish(seq)
        return freed

    def finish(self, seq: Sequence) -> None:
        """Drop a finished or aborted sequence from the queues and free its blocks."""
        if seq in self.running:
            self.running.remove(seq)
        elif seq in self.waiting:
            self.waiting.remove(seq)
        for child in seq.pending_forks:
            child.finish("abort")
        seq.pending_forks = []
        self.bm.free(seq)


def _decoding(seq: Sequence) -> bool:
    """One token left to compute: the sequence decodes this step (its prompt is done)."""
    return seq.num_tokens - seq.num_computed_tokens == 1
