"""The guided-decoding stage of a step: constraint compilation (cached, off the step loop) and
one int32 bitmask row per constrained row, applied to the logits in place."""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor

import torch

from stencil.engine.config import EngineConfig
from stencil.engine.sequence import Sequence

logger = logging.getLogger(__name__)


class GuidedDecoding:
    def __init__(self, tokenizer, vocab_size: int, eos_token_ids: set[int], config: EngineConfig) -> None:
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.eos_token_ids = eos_token_ids
        self.config = config
        self._compiler = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="stencil-compile")
        self.compile_seconds_total = 0.0
        self.compiles_total = 0
        self.mask_seconds_total = 0.0
        self.mask_rows_total = 0

    @property
    def compiler(self):
        if self._compiler is None:
            from stencil.constraints import ConstraintCompiler, TokenVocab

            vocab = TokenVocab.from_hf(self.tokenizer, vocab_size=self.vocab_size,
                                       eos_token_ids=sorted(self.eos_token_ids))
            self._compiler = ConstraintCompiler(vocab, cache_bytes=self.config.constraint_cache_bytes,
                                                timeout_s=self.config.constraint_compile_timeout)
        return self._compiler

    def compile(self, constraint):
        """Compile (or fetch from the cache); raises a ConstraintError subclass."""
        t = time.perf_counter()
        compiled = self.compiler.compile(constraint)
        self.compile_seconds_total += time.perf_counter() - t
        self.compiles_total += 1
        return compiled

    def submit(self, constraint) -> Future:
        return self._pool.submit(self.compile, constraint)

    def apply(self, logits: torch.Tensor, seqs: list[Sequence], ops) -> None:
        """Mask ``logits [rows, vocab]`` where each constrained row's matcher forbids a token."""
        rows = [i for i, s in enumerate(seqs) if s.matcher is not None and s.reasoning_done]
        if not rows:
            return
        from stencil.constraints import allocate_token_bitmask

        t = time.perf_counter()
        bitmask = allocate_token_bitmask(logits.shape[0], logits.shape[1])
        for i in rows:
            try:
                seqs[i].matcher.fill_next_token_bitmask(bitmask, i)
            except Exception as e:  # ends this sequence only; its row is not sampled
                logger.exception("mask fill failed for %s", seqs[i].request_id)
                seqs[i].finish("error", error=f"constraint mask failed: {type(e).__name__}")
        ops.apply_token_bitmask_inplace(logits, bitmask.to(logits.device),
                                        torch.tensor(rows, dtype=torch.int32, device=logits.device))
        self.mask_seconds_total += time.perf_counter() - t
        self.mask_rows_total += len(rows)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
