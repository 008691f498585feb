"""One ``stencil extract`` run: read the files, feed a backend, write records, count, summarize."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from stencil.extract.documents import Document, file_sha256, read_document
from stencil.extract.records import (
    Job,
    Outcome,
    document_error_record,
    make_validator,
    outcome_record,
)
from stencil.extract.results import ResultsFile


def scan_hashes(paths: list[str]) -> dict[str, str | None]:
    """Content hash of every path (None when it cannot be read as a regular file)."""
    return {p: file_sha256(p) for p in paths}


@dataclass(slots=True)
class Summary:
    """Counts of one run, and the failures to list."""

    ok: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    failures: list[tuple[str, str]] = field(default_factory=list)

    def add(self, record: dict[str, Any]) -> None:
        tokens = record.get("tokens") or {}
        self.prompt_tokens += tokens.get("prompt", 0)
        self.completion_tokens += tokens.get("completion", 0)
        if record["ok"]:
            self.ok += 1
        else:
            self.failed += 1
            self.failures.append((record["file"], str(record.get("error"))))

    def table(self, paths: list[str], earlier: dict[str, dict[str, Any]], out: str) -> str:
        """The end-of-run table, then every failed input (this run's and earlier ones)."""
        done_before = sum(p in earlier for p in paths)
        old_failures = [
            (p, str(earlier[p].get("error")))
            for p in paths
            if p in earlier and not earlier[p].get("ok")
        ]
        rate = (self.ok + self.failed) / self.seconds if self.seconds > 0 else 0.0
        tok_rate = self.completion_tokens / self.seconds if self.seconds > 0 else 0.0
        rows = [
            ("files", len(paths)),
            ("already done (skipped)", done_before),
            ("extracted ok", self.ok),
            ("failed", self.failed),
            ("tokens (prompt / output)", f"{self.prompt_tokens} / {self.completion_tokens}"),
            ("time", f"{self.seconds:.1f} s"),
            ("throughput", f"{rate:.2f} files/s, {tok_rate:.1f} output tok/s"),
            ("results", out),
        ]
        lines = [f"{k:<26}{v}" for k, v in rows]
        failures = self.failures + old_failures
        if failures:
            lines.append(f"failed files ({len(failures)}):")
            lines.extend(f"  {path}: {error[:160]}" for path, error in failures)
        return "\n".join(lines)


class Run:
    """Reads ``todo`` files, sends the readable ones to ``backend`` (``run(jobs)`` yields
    ``Outcome``s), appends one record per file as soon as it is known."""

    def __init__(
        self, results: ResultsFile, schema: dict[str, Any], backend: Any, progress: bool
    ) -> None:
        self.results = results
        self.validator = make_validator(schema)
        self.backend = backend
        self.progress = progress
        self.summary = Summary()

    def run(self, todo: list[str]) -> Summary:
        from tqdm import tqdm

        start = time.monotonic()
        bar = tqdm(
            total=len(todo),
            unit="file",
            disable=not self.progress,
            file=sys.stderr,
            dynamic_ncols=True,
        )
        try:
            docs, jobs = self._read(todo, bar)
            for outcome in self._outcomes(jobs):
                doc = docs.pop(outcome.key, None)
                if doc is None:  # a backend that answered twice: the first answer stands
                    continue
                self._write(outcome_record(doc, outcome, self.validator), bar, start)
            for doc in docs.values():  # a backend that lost a job: say so, never drop the file
                lost = Outcome(-1, error="the backend returned no result for this file")
                self._write(outcome_record(doc, lost, self.validator), bar, start)
        finally:
            bar.close()
            self.summary.seconds = time.monotonic() - start
        return self.summary

    def _read(self, todo: list[str], bar: Any) -> tuple[dict[int, Document], list[Job]]:
        docs: dict[int, Document] = {}
        jobs: list[Job] = []
        for key, path in enumerate(todo):
            doc = read_document(path)
            if doc.error is not None or doc.text is None:
                self._write(document_error_record(doc), bar, time.monotonic())
            else:
                docs[key] = doc
                jobs.append(Job(key, path, doc.text))
        return docs, jobs

    def _outcomes(self, jobs: list[Job]) -> Iterator[Outcome]:
        if jobs:
            yield from self.backend.run(jobs)

    def _write(self, record: dict[str, Any], bar: Any, start: float) -> None:
        self.results.append(record)
        self.summary.add(record)
        bar.update(1)
        elapsed = time.monotonic() - start
        if elapsed > 0 and self.summary.completion_tokens:
            bar.set_postfix(
                tok_s=f"{self.summary.completion_tokens / elapsed:.1f}",
                failed=self.summary.failed,
                refresh=False,
            )
