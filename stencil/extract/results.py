"""The results JSONL of ``stencil extract``: atomic appends, crash repair and resume.

Each record is one line written with a single ``write`` + ``fsync``; a line torn by a kill (no
trailing newline, or not JSON) is dropped when the file is next opened. A file counts as done
when a record with its path and content hash exists (ok or error, unless retrying errors);
records for the same path with another hash are stale and removed, so the file keeps at most one
record per path. Rewrites go through a temporary file and ``os.replace``.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class ResultsError(OSError):
    """The results file cannot be opened, locked or written (a usage error: exit code 2)."""


@dataclass(slots=True)
class Resume:
    """What an existing results file says: the kept records by path, and what was dropped."""

    records: dict[str, dict[str, Any]]
    torn: int = 0
    dropped: int = 0


class ResultsFile:
    """An append-only JSONL of records, locked for the lifetime of the object."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._fd = -1
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ResultsError(f"cannot create {str(self.path.parent)!r}: {e.strerror}") from e
        self._open()

    def _open(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as e:
            raise ResultsError(f"cannot open {str(self.path)!r}: {e.strerror or e}") from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            raise ResultsError(f"{str(self.path)!r} is in use by another stencil extract") from e
        self._fd = fd

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> ResultsFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def resume(
        self, current: dict[str, str | None], *, overwrite: bool = False, retry_errors: bool = False
    ) -> Resume:
        """Load the records, drop torn/stale/retried ones (rewriting the file if any were
        dropped). ``current`` maps each input path to its content hash (None if unreadable)."""
        if overwrite:
            self._rewrite([])
            return Resume({})
        lines, torn = _parse(self.path.read_bytes())
        kept: dict[str, dict[str, Any]] = {}
        dropped = len(lines) - len({r["file"] for r in lines})  # duplicate paths: the last wins
        for record in lines:
            kept[record["file"]] = record
        for path, record in list(kept.items()):
            stale = path in current and record.get("sha256") != current[path]
            if stale or (retry_errors and path in current and not record.get("ok")):
                del kept[path]
                dropped += 1
        if torn or dropped:
            self._rewrite(kept.values())
        return Resume(kept, torn, dropped)

    def append(self, record: dict[str, Any]) -> None:
        """Append one record as one line: one write, then fsync (a kill leaves at most a torn
        last line, which ``resume`` drops)."""
        data = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        try:
            written = os.write(self._fd, data)
            while written < len(data):  # short writes only for huge lines on odd filesystems
                written += os.write(self._fd, data[written:])
            os.fsync(self._fd)
        except OSError as e:
            raise ResultsError(f"cannot write {str(self.path)!r}: {e.strerror or e}") from e

    def _rewrite(self, records: Iterable[dict[str, Any]]) -> None:
        """Replace the file atomically (temp file + fsync + rename), then lock the new one."""
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        _fsync_dir(self.path.parent)
        self.close()
        self._open()


def read_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The complete records of a results file, the last one per path, in file order (read
    without the lock: for a finished file, as ``--review`` reads it)."""
    try:
        records, _ = _parse(Path(path).read_bytes())
    except OSError as e:
        raise ResultsError(f"cannot read {str(path)!r}: {e.strerror or e}") from e
    return list({r["file"]: r for r in records}.values())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _parse(data: bytes) -> tuple[list[dict[str, Any]], int]:
    """Complete, valid records in file order and how many lines were torn or invalid."""
    chunks = data.split(b"\n")
    torn = 1 if chunks[-1].strip() else 0  # no newline after the last line: a torn write
    records: list[dict[str, Any]] = []
    for chunk in chunks[:-1]:
        if not chunk.strip():
            continue
        try:
            record = json.loads(chunk)
        except ValueError:
            torn += 1
            continue
        if isinstance(record, dict) and isinstance(record.get("file"), str) and "ok" in record:
            records.append(record)
        else:
            torn += 1
    return records, torn
