"""What the HTTP server needs of an engine: ``AsyncLLMEngine`` provides it, and so does the
stand-in engine of the HTTP-layer tests (``tests/api/fake_engine.py``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol, runtime_checkable

from stencil.engine.outputs import RequestOutput
from stencil.engine.sampling_params import SamplingParams


@runtime_checkable
class ServingEngine(Protocol):
    """An engine behind ``create_app``: streams outputs per request, embeds, aborts, reports."""

    @property
    def tokenizer(self) -> Any: ...

    @property
    def model_name(self) -> str: ...

    @property
    def max_model_len(self) -> int: ...

    @property
    def vocab_size(self) -> int: ...

    @property
    def embedding_size(self) -> int:
        """Length of the vectors ``embed`` returns (the model's hidden size)."""
        ...

    @property
    def reasoning_end(self) -> str | None:
        """A reasoning model's end-of-reasoning marker (constraints apply after it), or None."""
        ...

    def generate(
        self, prompt: str | list[int], params: SamplingParams, request_id: str | None = None
    ) -> AsyncIterator[RequestOutput]:
        """Cumulative outputs of one request; raises ``RequestError`` / ``QueueFullError`` /
        ``ConstraintError`` before the first one for input it refuses."""
        ...

    async def embed(self, prompt: str | list[int], request_id: str | None = None) -> list[float]:
        """The L2-normalized pooled embedding of ``prompt``."""
        ...

    async def abort(self, request_id: str) -> None: ...

    def get_metrics(self) -> dict[str, float]: ...

    def is_healthy(self) -> bool: ...

    def shutdown(self) -> None: ...
