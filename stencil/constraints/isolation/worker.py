"""The compile worker's loop (runs in the child process): translate, validate and build each
constraint's matcher once, reply with the translation, keep nothing."""

from __future__ import annotations

import ctypes
import dataclasses
import os
import signal
import sys
from multiprocessing.connection import Connection

from ..errors import ConstraintError, ConstraintTooLargeError
from ..limits import Limits
from ..llg.limits import parser_limits
from ..llg.template import build_template
from ..spec import Constraint
from ..translation import translate
from ..vocab import TokenVocab
from .memory import address_space_bytes, heap_in_use, limit_address_space
from .protocol import Ready, Reply, WorkerInit

_WARM_UP_SCHEMA = '{"type": "object", "properties": {"a": {"type": "string", "pattern": "^a+$"}}}'
_PR_SET_PDEATHSIG = 1
_MEASURE_FROM = (
    4096  # grammar chars; below, the cache's estimate is close and mallinfo2 (~1 ms) is not
)


def serve(fd: int, parent_pid: int) -> None:
    """Answer jobs until the parent sends ``None`` or goes away."""
    _die_with_parent(parent_pid)
    conn = Connection(fd)
    init: WorkerInit = conn.recv()
    vocab = TokenVocab.from_tokenizer_json(
        init.tokenizer_json, init.vocab_size, init.tokenizer_size, init.eos_token_ids
    )
    _warm_up(vocab)
    idle = limit_address_space(init.memory_bytes)
    conn.send(Ready(os.getpid(), idle))
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        if job is None:
            return
        reply = run_job(vocab, *job)
        # a fragmented heap would make later compiles fail the budget: retire early instead
        retire = reply.status == "memory" or address_space_bytes() > idle + init.memory_bytes // 2
        conn.send(dataclasses.replace(reply, retire=retire))
        if retire:
            return


def run_job(vocab: TokenVocab, constraint: Constraint, limits: Limits) -> Reply:
    try:
        translation = translate(constraint)
        measure = len(translation.grammar) >= _MEASURE_FROM
        before = heap_in_use() if measure else None
        template = build_template(
            vocab, constraint.kind, translation.grammar, parser_limits(limits)
        )
        after = heap_in_use() if before is not None else None
        del template
        heap = after - before if before is not None and after is not None else 0
        return Reply("ok", translation=translation, heap_bytes=max(heap, 0))
    except ConstraintError as e:
        return Reply("error", error=e)
    except MemoryError:
        return Reply("memory")
    except RecursionError:
        error = ConstraintTooLargeError(
            "constraint nesting exceeds the recursion depth", "max_depth"
        )
        return Reply("error", error=error)
    except Exception as e:  # a bug in the compile code: reported, the worker stays usable
        return Reply("bug", detail=f"{type(e).__name__}: {e}"[:500])


def _warm_up(vocab: TokenVocab) -> None:
    """Import and initialise everything a compile touches, before the budget is measured."""
    run_job(vocab, Constraint.regex("[a-z]{1,8}"), Limits())
    run_job(vocab, Constraint.json_schema(_WARM_UP_SCHEMA), Limits())


def _die_with_parent(parent_pid: int) -> None:
    """Linux: SIGKILL this worker when the engine process dies, even mid-compile."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:
        os._exit(0)
