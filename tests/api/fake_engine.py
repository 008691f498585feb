"""A tiny stand-in for AsyncLLMEngine for fast HTTP-layer tests: a ``ServingEngine``
(``stencil/engine/serving_engine.py``; ``test_serving_engine.py`` checks the match)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Callable
from typing import Any

from stencil.engine.errors import QueueFullError, RequestError
from stencil.engine.outputs import CompletionOutput, Logprob, PositionLogprobs, RequestOutput


class FakeEngine:
    """Streams ``reply(prompt_ids, params)`` word by word as cumulative RequestOutputs."""

    def __init__(self, tokenizer: Any, reply: Callable[[list[int], Any], str]) -> None:
        self.tokenizer = tokenizer
        self.model_name = "fake-model"
        self.max_model_len = 2048
        self.vocab_size = 49152
        self.embedding_size = 8
        self.reasoning_end = None  # or a marker such as "</think>"
        self.reply = reply
        self.aborted: list[str] = []
        self.running: set[str] = set()
        self.queue_full = False
        self.delay = 0.0
        self.fail_with: Exception | None = None

    async def generate(
        self, prompt: str | list[int], params: Any, request_id: str | None = None
    ) -> AsyncIterator[RequestOutput]:
        if self.fail_with is not None:
            raise self.fail_with
        if self.queue_full:
            raise QueueFullError("queue full")
        if len(prompt) >= self.max_model_len:
            raise RequestError("prompt too long")
        rid = request_id or "r"
        self.running.add(rid)
        words = self.reply(prompt, params).split(" ")
        texts = [" ".join(words[: k + 1]) for k in range(len(words))]
        try:
            for step, text in enumerate(texts):
                await asyncio.sleep(self.delay)
                last = step == len(texts) - 1
                outs = [self._output(i, text, step, params, last) for i in range(params.n)]
                yield RequestOutput(rid, None, list(prompt), outs, finished=last)
        finally:
            self.running.discard(rid)

    def _output(self, index: int, text: str, step: int, params: Any, last: bool):
        lps = None
        if params.logprobs is not None:
            top = [Logprob(7, "x", -1.5)] * params.logprobs
            lps = [PositionLogprobs(Logprob(5, "w", -0.5), top) for _ in range(step + 1)]
        return CompletionOutput(
            index, text, list(range(step + 1)), "stop" if last else None, logprobs=lps
        )

    async def embed(self, prompt: str | list[int], request_id: str | None = None) -> list[float]:
        """A deterministic unit vector from the prompt's token ids."""
        ids = prompt if isinstance(prompt, list) else self.tokenizer(prompt).input_ids
        vec = [float((sum(ids) + i) % 7 + 1) for i in range(8)]
        norm = math.sqrt(sum(v * v for v in vec))
        return [v / norm for v in vec]

    async def abort(self, request_id: str) -> None:
        self.aborted.append(request_id)

    def get_metrics(self) -> dict[str, float]:
        return {
            "num_requests_running": float(len(self.running)),
            "kv_cache_usage": 0.0,
            "prompt_tokens_total": 3.0,
        }

    def is_healthy(self) -> bool:
        return True

    def shutdown(self) -> None:
        pass
