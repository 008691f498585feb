"""The ``--ray [ADDRESS]`` backend: a Ray Data pipeline with one engine per worker actor.

The driver reads the files (it needs their hashes for resume anyway) and ships the text; each
actor holds one ``stencil.LLM`` and runs every batch it receives as one continuous batch through
``EngineExtractor``. Outcomes stream back to the driver, which validates and writes the records
(the same JSONL, the same resume rules). Needs the ``ray`` extra: ``pip install stencil-serve[ray]``.

A killed actor (node lost, OOM) is restarted and its batch retried, up to ``max_retries`` times; Ray
delivers a batch's outputs only from the attempt that finished, so nothing is written twice. When
the retries run out, every file without an outcome gets an error outcome: none is lost.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from stencil.extract.engine_backend import EngineExtractor, ExtractSpec
from stencil.extract.records import Job, Outcome

LOCAL = "local"
_OUTCOME_FIELDS = Outcome.__slots__


class RayUnavailable(RuntimeError):
    """Ray is not installed (a usage error: exit code 2)."""


class ExtractActor:
    """One per Ray worker: loads the engine once, then extracts batch after batch."""

    def __init__(self, spec: ExtractSpec, engine_kwargs: dict[str, Any]) -> None:
        from stencil.engine.llm import LLM

        self.extractor = EngineExtractor(LLM(**engine_kwargs), spec)

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[Any]]:
        jobs = [
            Job(int(k), str(p), str(t))
            for k, p, t in zip(batch["key"], batch["path"], batch["text"], strict=True)
        ]
        outcomes = [o.as_dict() for o in self.extractor.run(jobs)]
        for o in outcomes:  # as JSON text: Ray's columns cannot hold dicts of varying keys
            o["spans"] = json.dumps(o["spans"])
        return {name: [o[name] for o in outcomes] for name in _OUTCOME_FIELDS}


class RayExtractor:
    """Drives the pipeline from the driver; ``address`` ``local`` starts a local Ray instance."""

    def __init__(
        self,
        address: str,
        spec: ExtractSpec,
        engine_kwargs: dict[str, Any],
        actors: int = 1,
        batch_size: int = 16,
        max_retries: int = 3,
    ) -> None:
        try:
            import ray
        except ImportError as e:
            raise RayUnavailable(
                "--ray needs Ray: pip install 'stencil-serve[ray]' (or 'ray[data]')"
            ) from e
        self.ray = ray
        self.address = address
        self.spec = spec
        self.engine_kwargs = engine_kwargs
        self.actors = max(1, actors)
        self.batch_size = max(1, batch_size)
        self.max_retries = max(0, max_retries)

    def _init(self) -> bool:
        """Connect (or start a local instance); True when this call started Ray."""
        if self.ray.is_initialized():
            return False
        if self.address == LOCAL:  # a private instance on the loopback interface
            self.ray.init(
                include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1"
            )
        else:
            self.ray.init(address=self.address, log_to_driver=False)
        return True

    def run(self, jobs: Iterable[Job]) -> Iterator[Outcome]:
        items = [{"key": j.key, "path": j.path, "text": j.text} for j in jobs]
        if not items:
            return
        started = self._init()
        try:
            yield from self._stream(items)
        finally:
            if started:
                self.ray.shutdown()

    def _stream(self, items: list[dict[str, Any]]) -> Iterator[Outcome]:
        missing = {item["key"] for item in items}
        try:
            for outcome in self._pipeline(items):
                missing.discard(outcome.key)
                yield outcome
        except self.ray.exceptions.RayError as e:  # retries exhausted, or the cluster is gone
            error = f"the Ray pipeline failed: {type(e).__name__}: {str(e)[:300]}"
            for key in sorted(missing):
                yield Outcome(key, error=error)

    def _pipeline(self, items: list[dict[str, Any]]) -> Iterator[Outcome]:
        import ray.data

        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        ctx.execution_options.preserve_order = False
        threads = self.engine_kwargs.get("num_threads") or 1
        dataset = ray.data.from_items(
            items, override_num_blocks=_blocks(len(items), self.batch_size)
        )
        results = dataset.map_batches(
            ExtractActor,
            fn_constructor_kwargs={"spec": self.spec, "engine_kwargs": self.engine_kwargs},
            batch_size=self.batch_size,
            batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=self.actors),
            num_cpus=threads,
            max_restarts=self.max_retries,
            max_task_retries=self.max_retries,
        )
        for row in results.iter_rows():
            fields = {name: _plain(row[name]) for name in _OUTCOME_FIELDS}
            yield Outcome(**{**fields, "spans": json.loads(fields["spans"])})


def _blocks(n: int, batch_size: int) -> int:
    return max(1, -(-n // batch_size))


def _plain(value: Any) -> Any:
    """numpy scalars/arrays from Ray rows -> plain Python values."""
    if hasattr(value, "tolist"):
        return value.tolist()
    return value
