"""The guided-decoding stage of a step: constraint compilation (cached, off the step loop, in
killable worker processes) and one int32 bitmask row per constrained row, applied to the logits
in place."""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

import torch

from stencil.engine.config import EngineConfig
from stencil.engine.errors import EngineError
from stencil.engine.metrics import EngineMetrics
from stencil.engine.sequence import Sequence

logger = logging.getLogger(__name__)


class GuidedDecoding:
    def __init__(
        self,
        tokenizer,
        vocab_size: int,
        eos_token_ids: set[int],
        config: EngineConfig,
        metrics: EngineMetrics | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.eos_token_ids = eos_token_ids
        self.config = config
        self._compiler = None
        self._compiler_lock = threading.Lock()
        self._closed = False
        # one thread drives each compile worker process (or compiles itself with 0 workers)
        threads = max(1, config.constraint_compile_workers)
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="stencil-compile")
        self._cancels: dict[Future, threading.Event] = {}
        self.metrics = metrics if metrics is not None else EngineMetrics()

    @property
    def compiler(self):
        with self._compiler_lock:  # compiles start from several threads; build one compiler
            if self._closed:
                raise EngineError("the engine is shut down")
            if self._compiler is None:
                self._compiler = self._new_compiler()
            return self._compiler

    def _new_compiler(self):
        from stencil.constraints import ConstraintCompiler, TokenVocab

        cfg = self.config
        vocab = TokenVocab.from_hf(
            self.tokenizer, vocab_size=self.vocab_size, eos_token_ids=sorted(self.eos_token_ids)
        )
        return ConstraintCompiler(
            vocab,
            cache_bytes=cfg.constraint_cache_bytes,
            timeout_s=cfg.constraint_compile_timeout,
            workers=cfg.constraint_compile_workers,
            memory_bytes=cfg.constraint_compile_memory,
        )

    def start_workers(self) -> None:
        """Build the compiler and start its worker processes now, not on the first compile."""
        pool = self.compiler.pool
        if pool is not None:
            pool.start()

    def compile(self, constraint, cancel: threading.Event | None = None):
        """Compile (or fetch from the cache); raises a ConstraintError subclass."""
        t = time.perf_counter()
        compiled = self.compiler.compile(constraint, cancel=cancel)
        self.metrics.constraint_compile_seconds_total += time.perf_counter() - t
        self.metrics.constraint_compiles_total += 1
        return compiled

    def submit(self, constraint) -> Future:
        cancel = threading.Event()
        fut = self._pool.submit(self.compile, constraint, cancel)
        self._cancels[fut] = cancel
        fut.add_done_callback(self._forget)
        if fut.done():
            self._cancels.pop(fut, None)
        return fut

    def cancel(self, fut: Future) -> None:
        """Abandon a submitted compile: a queued one never starts, a running isolated one has
        its worker killed (so nothing keeps computing for a request that is gone)."""
        fut.cancel()
        cancel = self._cancels.pop(fut, None)
        if cancel is not None:
            cancel.set()

    def _forget(self, fut: Future) -> None:
        self._cancels.pop(fut, None)

    def worker_pids(self) -> list[int]:
        """Live compile worker processes (empty before the first compile or with 0 workers)."""
        pool = self._compiler.pool if self._compiler is not None else None
        return pool.pids() if pool is not None else []

    def apply(
        self, logits: torch.Tensor, seqs: list[Sequence], ops, forward_seconds: float = 0.0
    ) -> None:
        """Mask ``logits [rows, vocab]`` where each constrained row's matcher forbids a token;
        a traced sequence's trace gets its mask (allowed count, fill time) and the forward's time."""
        rows = [i for i, s in enumerate(seqs) if s.matcher is not None and s.reasoning_done]
        if not rows:
            return
        from stencil.constraints import allocate_token_bitmask

        t = time.perf_counter()
        bitmask = allocate_token_bitmask(logits.shape[0], logits.shape[1])
        for i in rows:
            try:
                traced = seqs[i].trace is not None
                row_start = time.perf_counter() if traced else 0.0
                seqs[i].matcher.fill_next_token_bitmask(bitmask, i)
                if traced:
                    _trace_mask(seqs[i], bitmask, i, row_start, forward_seconds, self.vocab_size)
            except Exception as e:  # ends this sequence only; its row is not sampled
                logger.exception("mask fill failed for %s", seqs[i].request_id)
                error = f"constraint mask failed: {type(e).__name__}"
                seqs[i].finish("error", error=error, error_type="constraint")
        ops.apply_token_bitmask_inplace(
            logits,
            bitmask.to(logits.device),
            torch.tensor(rows, dtype=torch.int32, device=logits.device),
        )
        self.metrics.guided_mask_seconds_total += time.perf_counter() - t
        self.metrics.guided_mask_rows_total += len(rows)

    def shutdown(self) -> None:
        """Stop compiling: queued compiles are cancelled, running ones fail (their workers are
        killed), no worker process is left."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._compiler_lock:
            self._closed = True
            if self._compiler is not None:
                self._compiler.close()


def _trace_mask(
    seq: Sequence, bitmask: torch.Tensor, row: int, start: float, fwd: float, vocab: int
) -> None:
    """Record the row's mask in the sequence's trace (only for traced sequences)."""
    from stencil.constraints import bitmask_to_bool

    filled = time.perf_counter() - start
    allowed = int(bitmask_to_bool(bitmask[row : row + 1], vocab)[0].sum())
    seq.trace.on_mask(allowed, filled, fwd)
