"""``SpanAutomatonRef``: the pure-Python twin of ``SpanAutomaton`` (``csrc/span_walk.c``), used
where no C compiler is found and as the C walk's test oracle. Same marked text, same
positions (as sorted tuples), same masks.

The marked text is the document's JSON-escaped chunks joined by marker bytes 1..7 (bit 2: the
chunk before may end a value, bit 4: the chunk after may start one); byte 0 is a barrier.
A span is read from just after a marker with bit 4, crosses markers silently and may end
just before a marker with bit 2."""

from __future__ import annotations

import ctypes

import numpy as np

from .token_trie import TokenTrie

_QUOTE = ord('"')


class SpanAutomatonRef:
    __slots__ = ("_next", "_markers", "_flags", "_live", "_trie", "_words")

    def __init__(self, marked: bytes, trie: TokenTrie, words: int) -> None:
        nxt, link, length = [{}], [-1], [0]
        last = 0
        for c in marked:
            cur = len(nxt)
            nxt.append({})
            link.append(-1)
            length.append(length[last] + 1)
            p = last
            while p != -1 and c not in nxt[p]:
                nxt[p][c] = cur
                p = link[p]
            if p == -1:
                link[cur] = 0
            else:
                q = nxt[p][c]
                if length[p] + 1 == length[q]:
                    link[cur] = q
                else:
                    clone = len(nxt)
                    nxt.append(dict(nxt[q]))
                    link.append(link[q])
                    length.append(length[p] + 1)
                    while p != -1 and nxt[p].get(c) == q:
                        nxt[p][c] = clone
                        p = link[p]
                    link[q] = link[cur] = clone
            last = cur
        self._next = nxt
        self._markers = [[to for b, to in e.items() if 1 <= b <= 7] for e in nxt]
        self._flags = [_or(b for b in e if 1 <= b <= 7) for e in nxt]
        # live: a marker that lets a value end is reachable without crossing a barrier (byte
        # 0); every edge goes to a longer state, so longest first is a reverse topological order
        live = [False] * len(nxt)
        for x in sorted(range(len(nxt)), key=length.__getitem__, reverse=True):
            live[x] = bool(self._flags[x] & 2) or any(
                live[to] for b, to in nxt[x].items() if b != 0
            )
        self._live = live
        self._trie = trie
        self._words = words

    @property
    def num_states(self) -> int:
        return len(self._next)

    @staticmethod
    def states(pos: tuple[int, ...]) -> tuple[int, ...]:
        return pos

    def start(self) -> tuple[int, ...]:
        starts = {to for b, to in self._next[0].items() if 1 <= b <= 7 and b & 4}
        return tuple(sorted(x for x in starts if self._live[x]))

    def can_end(self, pos: tuple[int, ...]) -> bool:
        return any(self._flags[x] & 2 for x in pos)

    def _step(self, pos: tuple[int, ...], byte: int) -> tuple[int, ...]:
        out = set()
        for x in pos:
            for y in (x, *self._markers[x]):
                if (z := self._next[y].get(byte)) is not None and self._live[z]:
                    out.add(z)
        return tuple(sorted(out))

    def feed(self, pos: tuple[int, ...], data: bytes) -> tuple[tuple[int, ...] | None, int]:
        for i, byte in enumerate(data):
            if byte == _QUOTE and self.can_end(pos):
                return pos, i
            if byte <= 7 or not (pos := self._step(pos, byte)):
                return None, 0
        return pos, len(data)

    def walk(self, pos: tuple[int, ...], words: np.ndarray) -> None:
        t = self._trie
        tokens: list[int] = []
        stack = [(0, pos)]
        while stack:
            node, cur = stack.pop()
            if self.can_end(cur) and (q := t.child(node, _QUOTE)) >= 0:
                tokens += t.ntok[q : t.nend[q]].tolist()  # the quote's whole subtree
                tokens += t.xtok[t.xstart[q] : t.xstart[t.nend[q]]].tolist()
            nexts = {b for x in cur for y in (x, *self._markers[x]) for b in self._next[y]}
            for byte in nexts:
                if byte <= 7 or (c := t.child(node, byte)) < 0:
                    continue
                if after := self._step(cur, byte):
                    tokens += t.tokens(c)
                    stack.append((c, after))
        ids = np.array([x for x in tokens if x >= 0], np.int64)
        np.bitwise_or.at(words, ids >> 5, (np.uint32(1) << (ids & 31).astype(np.uint32)))

    def walk_and(self, pos: tuple[int, ...], scratch: int, row: int) -> None:
        """AND the walk into the bitmask row at address ``row`` (``scratch``: as many words)."""
        words = np.ctypeslib.as_array((ctypes.c_uint32 * self._words).from_address(row))
        spare = np.ctypeslib.as_array((ctypes.c_uint32 * self._words).from_address(scratch))
        spare[:] = 0
        self.walk(pos, spare)
        words &= spare


def _or(values) -> int:
    out = 0
    for v in values:
        out |= v
    return out
