"""What a grounding co-matcher would cost: the grammar keeps a grounded value as a free string
(llguidance's cached mask) and a suffix automaton over the document's JSON-escaped chunks
filters the tokens inside it (bench/csrc/span_walk.c: a walk of the token trie driven by the
automaton's edges). SmolLM2's vocabulary, one thread. Prints a markdown table.

    python bench/grounding_span_probe.py --sizes 1 10 30 100

Along the same value as bench/grounding_bench.py: the walk, llguidance's free-string mask and
the AND of the two, each timed once per token, beside llguidance's grounded mask (first pass).
Checked on every step: (free AND walk) holds every token llguidance's grounded mask allows;
"extra" counts the tokens it adds (llguidance keeps only the canonical token on a forced path,
e.g. ``er`` but not ``e`` after ``Engine`` of ``Engineer``; consuming ``e`` is still accepted).
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import time
from pathlib import Path

import numpy as np
from grounding_bench import DECIMAL, SCHEMA, document, print_table, tail_value

from stencil import default_model_path
from stencil.cbuild import build_library
from stencil.constraints import Constraint, ConstraintCompiler, TokenVocab
from stencil.constraints.bitmask import allocate_token_bitmask, bitmask_words
from stencil.constraints.grounding import source_chunks

SOURCE = Path(__file__).resolve().parent / "csrc" / "span_walk.c"
SPACE = ("\\n", "\\r", "\\t")


def load() -> ctypes.CDLL:
    lib = ctypes.CDLL(str(build_library(SOURCE, ["-O2", "-shared", "-fPIC"])))
    p, i32 = ctypes.c_void_p, ctypes.c_int32
    lib.sam_build.restype = p
    lib.sam_build.argtypes = [ctypes.c_char_p, i32]
    lib.sam_free.argtypes = [p]
    lib.sam_states.argtypes = [p]
    lib.sam_start.argtypes = [p, p]
    lib.sam_advance.argtypes = [p, p, i32, ctypes.c_char_p, i32]
    lib.sam_walk.argtypes = [p, p, i32, p, p, p, p, p, p]
    return lib


def marked_text(doc: str) -> bytes:
    """The document's chunks joined by markers (bench/csrc/span_walk.c); decimal numbers are
    barriers (as the schema's ``total: number`` sibling makes them)."""
    chunks = ["\x00" if DECIMAL.fullmatch(c) else c for c in source_chunks(doc)]
    ok = [not (c.isspace() or c in SPACE or c == "\x00") for c in chunks]
    out = bytearray()
    for i, c in enumerate(chunks):
        out.append(1 | (2 if i and ok[i - 1] else 0) | (4 if ok[i] else 0))
        out += c.encode()
    out.append(1 | (2 if ok and ok[-1] else 0))
    return bytes(out)


def token_trie(vocab: TokenVocab) -> list[np.ndarray]:
    """The vocabulary's byte trie in DFS order, with each node's children in CSR form."""
    tokens = sorted(
        (b, i)
        for i in range(vocab.tokenizer_size)
        if not vocab.is_special(i) and (b := vocab.token_bytes(i))
    )
    nbyte, ntok, nend, path = [0], [-1], [0], []
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
    i32 = np.int32
    return [
        np.array(cbyte, np.uint8),
        np.array(cidx, i32),
        np.array(cstart, i32),
        np.array(ntok, i32),
        np.array(nend, i32),
    ]


def row(lib, vocab: TokenVocab, tokenizer, trie_ptrs: list[int], kib: int) -> str:
    doc = document(kib)
    text = marked_text(doc)
    start = time.perf_counter()
    sam = lib.sam_build(text, len(text))
    build_ms = (time.perf_counter() - start) * 1e3
    pos = np.zeros(8, np.int32)
    npos = lib.sam_start(sam, pos.ctypes.data)
    compiler = ConstraintCompiler(vocab, cache_bytes=0)
    grounded = Constraint.json_schema(SCHEMA, source_text=doc, ground_strings=True)
    g = compiler.compile(grounded).new_matcher()
    f = compiler.compile(Constraint.json_schema(SCHEMA)).new_matcher()
    for t in tokenizer.encode('{"seller": "', add_special_tokens=False):
        assert g.accept_token(t) and f.accept_token(t)
    gmask = allocate_token_bitmask(1, vocab.vocab_size)
    fmask = allocate_token_bitmask(1, vocab.vocab_size)
    walk = np.zeros(bitmask_words(vocab.vocab_size), np.uint32)
    free_view = fmask.numpy()[0].view(np.uint32)
    ptrs = [pos.ctypes.data, *trie_ptrs, walk.ctypes.data]
    times: dict[str, list[float]] = {"walk": [], "free": [], "and": [], "grounded": []}
    extra = 0
    for t in tokenizer.encode(tail_value(doc), add_special_tokens=False):
        stamp = time.perf_counter()
        walk[:] = 0
        lib.sam_walk(sam, ptrs[0], npos, *ptrs[1:])
        times["walk"].append(time.perf_counter() - stamp)
        stamp = time.perf_counter()
        f.fill_next_token_bitmask(fmask, 0)
        times["free"].append(time.perf_counter() - stamp)
        stamp = time.perf_counter()
        np.bitwise_and(free_view, walk, out=free_view)
        times["and"].append(time.perf_counter() - stamp)
        stamp = time.perf_counter()
        g.fill_next_token_bitmask(gmask, 0)
        times["grounded"].append(time.perf_counter() - stamp)
        ours, theirs = free_view, gmask.numpy()[0].view(np.uint32)
        assert not (theirs & ~ours).any(), "a token llguidance allows is missing"
        extra += sum(int(w).bit_count() for w in ours & ~theirs)
        b = vocab.token_bytes(t)
        npos = lib.sam_advance(sam, ptrs[0], npos, b, len(b))
        assert npos and g.accept_token(t) and f.accept_token(t)
    states = lib.sam_states(sam)
    lib.sam_free(sam)
    us = {k: statistics.median(v) * 1e6 for k, v in times.items()}
    co = us["walk"] + us["free"] + us["and"]
    return (
        f"| {kib} | {states} | {build_ms:.1f} | {us['walk']:.2f} | {us['free']:.2f} "
        f"| {us['and']:.2f} | {co / us['free']:.2f}x | {us['grounded']:.1f} "
        f"| {us['grounded'] / us['free']:.1f}x | {extra} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 10, 30, 100], help="KiB")
    args = parser.parse_args()
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(default_model_path()))
    vocab = TokenVocab.from_hf(tokenizer)
    lib = load()
    trie = token_trie(vocab)
    rows = [row(lib, vocab, tokenizer, [a.ctypes.data for a in trie], kib) for kib in args.sizes]
    print_table(
        "| document KiB | automaton states | build ms | walk µs p50 | free mask µs p50 "
        "| AND µs p50 | co-matcher ratio | llguidance grounded µs p50 | ratio | extra tokens |",
        rows,
    )


if __name__ == "__main__":
    main()
