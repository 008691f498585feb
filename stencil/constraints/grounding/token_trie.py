"""``TokenTrie``: a vocabulary's token bytes as a byte trie, in the flat arrays the span walk
(``csrc/span_walk.c`` and its Python twin) reads."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..vocab import TokenVocab


@dataclass(frozen=True, slots=True, eq=False)
class TokenTrie:
    """Nodes in DFS order (node 0 the root, the empty prefix): ``ntok[i]`` is the token whose
    bytes are node i's path (-1: none), ``xtok[xstart[i]:xstart[i + 1]]`` the other tokens with
    the same bytes (a SentencePiece vocabulary's byte-fallback twins of its one-character
    pieces: ``<0x2F>`` and ``/``), ``nend[i]`` the end of its subtree; node i's children are
    ``cidx[cstart[i]:cstart[i + 1]]``, sorted by their bytes ``cbyte``. Special tokens and
    padding are left out (no grounded value holds them)."""

    cbyte: np.ndarray  # uint8
    cidx: np.ndarray  # int32
    cstart: np.ndarray  # int32
    ntok: np.ndarray  # int32
    nend: np.ndarray  # int32
    xstart: np.ndarray  # int32
    xtok: np.ndarray  # int32
    quoted: np.ndarray  # int32: the tokens holding a quote (b'"'), by id
    reach: np.ndarray  # int32: how many bytes each of them carries after its first quote

    @classmethod
    def from_vocab(cls, vocab: TokenVocab) -> TokenTrie:
        tokens = sorted(
            (b, i)
            for i in range(vocab.tokenizer_size)
            if not vocab.is_special(i) and (b := vocab.token_bytes(i))
        )
        nbyte, ntok, nend = [0], [-1], [0]
        path: list[tuple[bytes, int]] = []
        twins: dict[int, list[int]] = {}
        for b, t in tokens:
            while path and not b.startswith(path[-1][0]):
                nend[path.pop()[1]] = len(nbyte)
            for d in range(len(path[-1][0]) if path else 0, len(b)):
                path.append((b[: d + 1], len(nbyte)))
                nbyte.append(b[d])
                ntok.append(-1)
                nend.append(0)
            if ntok[path[-1][1]] == -1:
                ntok[path[-1][1]] = t
            else:
                twins.setdefault(path[-1][1], []).append(t)
        for _, idx in path:
            nend[idx] = len(nbyte)
        nend[0] = len(nbyte)
        cstart, cbyte, cidx = [], [], []
        for i in range(len(nbyte)):
            cstart.append(len(cidx))
            j = i + 1
            while j < nend[i]:
                cbyte.append(nbyte[j])
                cidx.append(j)
                j = nend[j]
        cstart.append(len(cidx))
        xstart, xtok = [0], []
        for i in range(len(nbyte)):
            xtok += twins.get(i, [])
            xstart.append(len(xtok))
        i32 = np.int32
        quoted = sorted((t, len(b) - b.index(b'"') - 1) for b, t in tokens if b'"' in b)
        return cls(
            np.array(cbyte, np.uint8),
            np.array(cidx, i32),
            np.array(cstart, i32),
            np.array(ntok, i32),
            np.array(nend, i32),
            np.array(xstart, i32),
            np.array(xtok, i32),
            np.array([t for t, _ in quoted], i32),
            np.array([r for _, r in quoted], i32),
        )

    def tokens(self, node: int) -> list[int]:
        """Every token whose bytes are node ``node``'s path."""
        first = int(self.ntok[node])
        more = self.xtok[self.xstart[node] : self.xstart[node + 1]].tolist()
        return [first, *more] if first >= 0 else []

    def child(self, node: int, byte: int) -> int:
        """Node ``node``'s child by ``byte`` (-1: none)."""
        lo, hi = int(self.cstart[node]), int(self.cstart[node + 1])
        at = lo + int(np.searchsorted(self.cbyte[lo:hi], byte))
        return int(self.cidx[at]) if at < hi and self.cbyte[at] == byte else -1

    def byte_token(self, byte: int) -> int:
        """A token that is exactly one byte (-1: the vocabulary has none)."""
        node = self.child(0, byte)
        return -1 if node < 0 else int(self.ntok[node])
