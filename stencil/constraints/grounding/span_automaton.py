"""``SpanAutomaton``: the spans of one document (its marked text, see ``grounding.marked_text``)
as a suffix automaton in C (``csrc/span_walk.c``), with the per-token walk that sets the
tokens continuing a span. ``span_automaton_ref.SpanAutomatonRef`` is its pure-Python twin,
used where no C compiler is found; the two give the same masks (tests/constraints)."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

from stencil.paths import load_library

from .token_trie import TokenTrie

SOURCE = Path(__file__).resolve().parent / "csrc" / "span_walk.c"
MAX_SET = 32  # the most automaton states in one position (MAXSET in the C source)


def load_span_library() -> ctypes.CDLL | None:
    """The compiled walk (built into the cache on first use), or None where it cannot be built."""
    flags = ["-O3", "-march=native", "-shared", "-fPIC"]
    lib = load_library(SOURCE, flags, "grounded strings use the Python walk")
    if lib is None:
        return None
    p, i32 = ctypes.c_void_p, ctypes.c_int32
    lib.sam_build.restype = p
    lib.sam_build.argtypes = [ctypes.c_char_p, i32]
    lib.sam_free.argtypes = [p]
    lib.sam_states.argtypes = [p]
    lib.sam_start.argtypes = [p, p]
    lib.sam_can_end.argtypes = [p, ctypes.c_char_p, i32]
    lib.sam_feed.argtypes = [p, p, i32, ctypes.c_char_p, i32, p]
    lib.sam_set_trie.argtypes = [p, p, p, p, p, p, p, p, i32]
    lib.sam_walk.argtypes = [p, ctypes.c_char_p, i32, p]
    lib.sam_walk_and.argtypes = [p, ctypes.c_char_p, i32, p, p]
    lib.sam_walk_and.restype = None
    return lib


class SpanAutomaton:
    """Immutable after construction (shared by threads). A position is the automaton states the bytes so far reach (the ways they sit in the
    text), packed as int32 ``bytes``; ``states`` unpacks one."""

    __slots__ = ("_lib", "_sam", "_trie")

    def __init__(self, lib: ctypes.CDLL, marked: bytes, trie: TokenTrie, words: int) -> None:
        self._lib = lib
        self._sam = lib.sam_build(marked, len(marked))
        self._trie = trie  # kept alive: the walk reads its arrays by pointer
        arrays = (trie.cbyte, trie.cidx, trie.cstart, trie.ntok, trie.nend, trie.xstart, trie.xtok)
        pointers = [a.ctypes.data for a in arrays]
        if not len(trie.xtok):
            pointers[5] = None  # no two tokens share their bytes: the walk skips the lookup
        lib.sam_set_trie(self._sam, *pointers, words)

    def __del__(self) -> None:
        if getattr(self, "_sam", None):
            self._lib.sam_free(self._sam)
            self._sam = None

    @property
    def num_states(self) -> int:
        return self._lib.sam_states(self._sam)

    @staticmethod
    def states(pos: bytes) -> tuple[int, ...]:
        return tuple(sorted(np.frombuffer(pos, np.int32).tolist()))

    def start(self) -> bytes:
        buf = ctypes.create_string_buffer(4 * MAX_SET)
        n = self._lib.sam_start(self._sam, buf)
        return buf.raw[: 4 * n]

    def can_end(self, pos: bytes) -> bool:
        return bool(self._lib.sam_can_end(self._sam, pos, len(pos) // 4))

    def feed(self, pos: bytes, data: bytes) -> tuple[bytes | None, int]:
        """``pos`` advanced by ``data`` up to a closing quote, and how many bytes that took
        (``len(data)`` without a closing quote); None: not a span."""
        buf, used = ctypes.create_string_buffer(pos, 4 * MAX_SET), ctypes.c_int32()
        n = self._lib.sam_feed(self._sam, buf, len(pos) // 4, data, len(data), ctypes.byref(used))
        return (buf.raw[: 4 * n], used.value) if n else (None, 0)

    def walk(self, pos: bytes, words: np.ndarray) -> None:
        """Set in ``words`` (uint32, the bitmask layout) every token that continues a span
        from ``pos``: its bytes up to a closing quote are a span's next bytes, and a closing
        quote only where a span may end (what follows it is the grammar's)."""
        self._lib.sam_walk(self._sam, pos, len(pos) // 4, words.ctypes.data)

    def walk_and(self, pos: bytes, scratch: int, row: int) -> None:
        """AND the walk into the bitmask row at address ``row`` (``scratch``: as many words)."""
        self._lib.sam_walk_and(self._sam, pos, len(pos) // 4, scratch, row)
