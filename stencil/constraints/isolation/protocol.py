"""Messages between the engine process and a compile worker (pickled over a socket).

parent -> worker: ``WorkerInit`` once, then ``(Constraint, Limits)`` jobs, ``None`` to exit.
worker -> parent: ``Ready`` once, then one ``Reply`` per job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..errors import ConstraintError
from ..translation import Translation


@dataclass(frozen=True, slots=True)
class WorkerInit:
    tokenizer_json: str
    vocab_size: int
    tokenizer_size: int
    eos_token_ids: tuple[int, ...]
    memory_bytes: int
    """Address space the worker may use beyond its idle footprint (RLIMIT_AS)."""


@dataclass(frozen=True, slots=True)
class Ready:
    pid: int
    idle_bytes: int
    """The worker's address space when idle, before the budget applies."""


@dataclass(frozen=True, slots=True)
class Reply:
    status: Literal["ok", "error", "memory", "bug"]
    translation: Translation | None = None
    """The constraint's translation (``ok``)."""
    heap_bytes: int = 0
    """C-heap bytes of the matcher template built from it (``ok``; 0 when not measurable)."""
    error: ConstraintError | None = None
    """The constraint's typed error (``error``)."""
    detail: str = ""
    """What went wrong (``bug``: an unexpected exception in the compile code)."""
    retire: bool = False
    """The worker exits after this reply (its heap grew past half its budget); start another."""
