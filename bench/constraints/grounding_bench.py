"""What grounding costs: compile time of a grounded schema by document size, and the mask time per
token inside a grounded string beside the same schema's free string, and at the step that opens
the value (where a vocabulary's tokens with more bytes after a quote than the grammar's window
are checked whole). SmolLM2's vocabulary (the embedded model) and Qwen2.5's (``--vocab qwen``:
read from the real Qwen2.5-Coder-0.5B GGUF file, downloaded once), taken in turns per repeat;
one thread, no compile cache (one compiler per vocabulary: its token trie, built once, is timed
apart). Prints a markdown table.

    python -m bench.constraints.grounding_bench --sizes 1 10 30 100 --repeats 5
    python -m bench.constraints.grounding_bench --vocab smol qwen --sizes 1 10 30 --repeats 3
    python -m bench.constraints.grounding_bench --sizes 1 10 30 --repeats 3 --lexemes
    python -m bench.constraints.grounding_bench --sizes 1 10 30 --stats
    python -m bench.constraints.grounding_bench --vocab smol qwen --sizes 10 --long-check

``--long-check`` times the check of a vocabulary's long quote tokens alone (what each mask of a
co-matched grounded schema adds to llguidance's mask and the span walk), at the step that opens
the grounded value, at one inside it, and where a free string sibling opens (where llguidance's
mask holds Qwen's ``"../../../``); the best of 7 rounds of 2,000 calls, robust to a loaded
machine.

``--stats`` prints llguidance's own per-step counters for those forms, summed along the value
(lexer fuel spent building states, token-trie nodes walked, compute µs; llguidance reports a
step's counters with the next call, so sums, not per-step medians). ``--lexemes`` times the grounded lexeme alone (``start: "\"" S "\""``) in the forms llguidance
offers, and what warming the lexer at compile time (one masked walk over the whole document)
would cost and buy.

Documents are made of the README example documents (examples/*), repeated up to the size. The
mask is timed along the tokens of a value copied from the end of the document (the longest
path through the substring automaton after the last decimal number, which the schema's
``total: number`` sibling makes a barrier); the free string is timed along the same tokens. The
first pass over a fresh compile is what decoding meets (llguidance builds the lexer's states
lazily); the second pass shows the mask with those states built.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import time
import timeit
from pathlib import Path

from bench.common import table
from stencil import default_model_path
from stencil.constraints import Constraint, ConstraintCompiler, TokenVocab
from stencil.constraints.bitmask import allocate_token_bitmask, bitmask_words
from stencil.constraints.grounding.lark_writer import source_chunks

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = {
    "type": "object",
    "properties": {"seller": {"type": "string"}, "total": {"type": "number"}},
    "required": ["seller", "total"],
}

DECIMAL = re.compile(r"[0-9][0-9,]*\.[0-9]+")


def document(kib: int) -> str:
    parts = [p.read_text(errors="replace") for p in sorted((ROOT / "examples").iterdir())]
    text = "\n".join(parts)
    return (text * (kib * 1024 // len(text) + 1))[: kib * 1024]


def tail_value(doc: str) -> str:
    """A value copied from the document's end (as JSON string content): whole words after the
    last decimal number (a barrier beside the schema's ``total: number``)."""
    tail = DECIMAL.split(doc[-120:])[-1]
    return json.dumps(tail[tail.index(" ") :].strip(), ensure_ascii=False)[1:-1]


def mask_times(compiled, tokenizer, value: str) -> tuple[float, list[float]]:
    """The mask time at the step that opens the value (before the token holding its quote) and
    at each step inside it (µs)."""
    matcher = compiled.new_matcher()
    mask = allocate_token_bitmask(1, compiled.vocab.vocab_size)
    prefix = tokenizer.encode('{"seller": "', add_special_tokens=False)
    for t in prefix[:-1]:
        assert matcher.accept_token(t)
    opening = timed_mask(matcher, mask)
    assert matcher.accept_token(prefix[-1])
    out = []
    for t in tokenizer.encode(value, add_special_tokens=False):
        out.append(timed_mask(matcher, mask))
        assert matcher.accept_token(t), "the value is not accepted"
    return opening, out


def timed_mask(matcher, mask) -> float:
    start = time.perf_counter()
    matcher.fill_next_token_bitmask(mask, 0)
    return (time.perf_counter() - start) * 1e6


def load_vocab(name: str):
    """The tokenizer and ``TokenVocab`` of ``smol`` (the embedded model) or ``qwen`` (the real
    Qwen2.5-Coder-0.5B GGUF file's)."""
    from transformers import AutoTokenizer

    if name == "smol":
        tokenizer = AutoTokenizer.from_pretrained(str(default_model_path()))
    else:
        from stencil.engine.models.gguf import gguf_model_dir
        from stencil.testing.real_models import real_model_path

        path = gguf_model_dir(real_model_path("qwen2.5-coder-0.5b"))
        tokenizer = AutoTokenizer.from_pretrained(str(path))
    return tokenizer, TokenVocab.from_hf(tokenizer)


# one JSON string character, and one that is not whitespace (as in stencil.constraints.grounding)
CHAR = r'(?:[^"\\\x00-\x1f]|\\["\\\x2fbfnrt]|\\u[0-9a-fA-F]{4})'
EDGE = r'(?:[^"\\\x00-\x20]|\\["\\\x2fbfu]|\\u[0-9a-fA-F]{4})'


def lexeme_grammars(doc: str) -> dict[str, str]:
    """The grounded lexeme in each form (decimal numbers as barriers, as the schema makes them)."""
    chunks = ['"' if DECIMAL.fullmatch(c) else c for c in source_chunks(doc)]
    spec = json.dumps({"substring_chunks": chunks}, ensure_ascii=False)
    words = json.dumps({"substring_words": "".join(chunks)}, ensure_ascii=False)
    edge = f" & /{EDGE}(?:{CHAR}*{EDGE})?/"
    forms = {
        "free string": f"/{CHAR}*/",
        "substring_chunks": f"%regex {spec}",
        "substring_chunks & edge (generated today)": f"%regex {spec}{edge}",
        "substring_words & edge": f"%regex {words}{edge}",
    }
    return {k: f'start: "\\"" S "\\""\nS: {v}\n' for k, v in forms.items()}


def llg_times(matcher, tokens: list[int], words: int) -> list[float]:
    """Mask times along ``tokens`` on a raw llguidance matcher (stops at a refused token)."""
    mask = allocate_token_bitmask(1, words * 32)
    out = []
    for t in tokens:
        start = time.perf_counter()
        matcher.unsafe_compute_mask_ptr(mask.data_ptr(), words * 4)
        out.append((time.perf_counter() - start) * 1e6)
        if not matcher.consume_token(t):
            break
    return out


def warm_up(template, tokenizer, doc: str, words: int) -> None:
    """Build the lexer states a copied span meets: walk every barrier-free stretch of the
    document as one value, masking at each token (copies share the template's lexer)."""
    quote = tokenizer.encode('"', add_special_tokens=False)
    for part in DECIMAL.split(doc):
        text = json.dumps(part.strip(), ensure_ascii=False)[1:-1]
        if text:
            llg_times(template.deep_copy(), quote + tokenizer.encode(text), words)


def stats_rows(vocab, tokenizer, kib: int) -> list[list]:
    """llguidance's own per-step counters summed along the value, first and second pass:
    lexer fuel spent building states, token-trie nodes walked, compute µs."""
    import llguidance

    doc = document(kib)
    value = tokenizer.encode(tail_value(doc), add_special_tokens=False)
    quote = tokenizer.encode('"', add_special_tokens=False)
    keys = ("lexer_cost", "trie_nodes_walked", "compute_time_us")
    rows = []
    for name, grammar in lexeme_grammars(doc).items():
        template = llguidance.LLInterpreter(
            vocab.llg_tokenizer,
            grammar,
            enable_backtrack=False,
            enable_ff_tokens=False,
            log_level=0,
        )
        template.start_without_prompt()
        cells = []
        for _ in range(2):
            interp = template.deep_copy()
            steps = []
            for i, t in enumerate(quote + value):
                info = json.loads(interp.compute_mask()[1])
                interp.commit_token(t)
                if i >= len(quote) and info.get("progress"):
                    steps.append(info["progress"][0].get("stats", {}))
            cells += [f"{sum(s.get(k, 0) for s in steps)}" for k in keys]
        rows.append([kib, name, *cells])
    return rows


def lexeme_rows(vocab, tokenizer, kib: int, repeats: int) -> list[list]:
    import llguidance

    doc = document(kib)
    words = bitmask_words(vocab.vocab_size)
    value = tokenizer.encode(tail_value(doc), add_special_tokens=False)
    quote = tokenizer.encode('"', add_special_tokens=False)
    grammars = lexeme_grammars(doc)
    today = grammars["substring_chunks & edge (generated today)"]
    no_pre = llguidance.LLParserLimits(precompute_large_lexemes=False)
    llt = vocab.llg_tokenizer
    setups = [(name, g, llt, None, False) for name, g in grammars.items()]
    setups += [
        ("same, tokenizer without slices", today, llt.with_slices([]), None, False),
        ("same, precompute_large_lexemes off", today, llt, no_pre, False),
        ("same, warmed by walking the document", today, llt, None, True),
    ]
    rows = []
    for name, grammar, tok, limits, warm in setups:
        compile_ms, first, second = [], [], []
        for _ in range(repeats):
            start = time.perf_counter()
            template = llguidance.LLMatcher(tok, grammar, log_level=0, limits=limits)
            if warm:
                warm_up(template, tokenizer, doc, words)
            compile_ms.append((time.perf_counter() - start) * 1e3)
            m = template.deep_copy()
            llg_times(m, quote, words)
            first += llg_times(m, value, words)
            m.rollback(len(value))
            second += llg_times(m, value, words)
        medians = (statistics.median(t) for t in (compile_ms, first, second))
        rows.append([kib, name, *(f"{m:.1f}" for m in medians)])
    return rows


def long_check_rows(name: str, tokenizer, compiler, kib: int) -> list[list]:
    """The long quote tokens' check alone (``GroundedSpans.refuse_long``, on a matcher's own
    state and mask row: internals, read here only), µs per call."""
    doc = document(kib)
    grounded = {"type": "string", "x-grounded": True}
    both = {
        "type": "object",
        "properties": {"seller": grounded, "note": {"type": "string"}},
        "required": ["seller", "note"],
    }
    compiled = compiler.compile(Constraint.json_schema(both, source_text=doc))
    mask = allocate_token_bitmask(1, compiled.vocab.vocab_size)
    rows = []
    for where, text in (
        ("opening the grounded value", '{"seller":'),
        ("inside the grounded value", '{"seller": "' + tail_value(doc)[:12]),
        ("opening a free string", '{"seller": "' + tail_value(doc)[:12] + '", "note":'),
    ):
        matcher = compiled.new_matcher()
        for t in tokenizer.encode(text, add_special_tokens=False):
            assert matcher.accept_token(t), text
        rows.append([name, kib, where, len(matcher._spans._long), check_us(matcher, mask)])
    return rows


def check_us(matcher, mask) -> float:
    """The best of 7 rounds of 2,000 calls of the check on ``matcher``'s next mask, µs."""
    matcher.fill_next_token_bitmask(mask, 0)
    spans, state, llg, row = matcher._spans, matcher._ground[-1], matcher._m, mask.data_ptr()
    rounds = timeit.repeat(lambda: spans.refuse_long(state, row, llg), number=2000, repeat=7)
    return min(rounds) / 2000 * 1e6


def print_table(headers: list[str], rows: list[list]) -> None:
    """The machine's load, then the table."""
    print(f"load average {os.getloadavg()[0]:.2f}")
    print(table(headers, rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 10, 30, 100], help="KiB")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--lexemes", action="store_true", help="the lexeme's forms alone")
    parser.add_argument("--stats", action="store_true", help="llguidance's per-step counters")
    parser.add_argument("--vocab", nargs="+", choices=["smol", "qwen"], default=["smol"])
    parser.add_argument("--long-check", action="store_true", help="the long quote tokens' check")
    args = parser.parse_args()
    if args.stats or args.lexemes:
        tokenizer, vocab = load_vocab("smol")
        if args.stats:
            rows = [r for kib in args.sizes for r in stats_rows(vocab, tokenizer, kib)]
            sums = ["lexer fuel Σ", "trie nodes Σ", "compute µs Σ"]
            header = ["document KiB", "lexeme", *sums, "second pass: lexer fuel Σ", *sums[1:]]
        else:
            rows = [
                r for kib in args.sizes for r in lexeme_rows(vocab, tokenizer, kib, args.repeats)
            ]
            header = [
                "document KiB",
                "lexeme",
                "compile ms p50",
                "mask µs p50",
                "same, second pass",
            ]
        print_table(header, rows)
        return
    setups = {}
    for name in args.vocab:
        tokenizer, vocab = load_vocab(name)
        compiler = ConstraintCompiler(vocab, cache_bytes=0)
        start = time.perf_counter()
        compiler.span_walk()  # once per compiler (vocabulary): the token trie, the C walk
        print(
            f"{name}: token trie and span walk {(time.perf_counter() - start) * 1e3:.0f} ms, once"
        )
        setups[name] = (tokenizer, compiler)
    if args.long_check:
        rows = [
            r
            for kib in args.sizes
            for name, (tokenizer, compiler) in setups.items()
            for r in long_check_rows(name, tokenizer, compiler, kib)
        ]
        print_table(
            ["vocabulary", "document KiB", "step", "long quote tokens", "µs per call"], rows
        )
        return
    rows = []
    for kib in args.sizes:
        doc = document(kib)
        value = tail_value(doc)
        samples = {name: [[] for _ in range(7)] for name in args.vocab}
        for _ in range(args.repeats):
            for name, (tokenizer, compiler) in setups.items():  # the vocabularies in turn
                compile_ms, grounded, warm, free, g_open, w_open, f_open = samples[name]
                start = time.perf_counter()
                c = Constraint.json_schema(SCHEMA, source_text=doc, ground_strings=True)
                compiled = compiler.compile(c)
                compile_ms.append((time.perf_counter() - start) * 1e3)
                for opens, steps, schema_compiled in (
                    (g_open, grounded, compiled),
                    (w_open, warm, compiled),  # the lexer's states now built
                    (f_open, free, compiler.compile(Constraint.json_schema(SCHEMA))),
                ):
                    opening, inside = mask_times(schema_compiled, tokenizer, value)
                    opens.append(opening)
                    steps += inside
        for name in args.vocab:
            p50 = [statistics.median(x) for x in samples[name]]
            compile_ms, g, w, f, g_open, w_open, f_open = p50
            ms = [f"{x:.1f}" for x in (compile_ms, g, w, f)]
            opening = [f"{x:.1f}" for x in (g_open, w_open, f_open)]
            rows.append([name, kib, *ms, f"{g / f:.2f}x", f"{w / f:.2f}x", *opening])
    header = ["vocabulary", "document KiB", "compile ms p50", "grounded mask µs p50"]
    header += ["same, second pass", "free string mask µs p50", "ratio", "second pass ratio"]
    header += ["opening step µs p50: grounded", "second pass", "free"]
    print_table(header, rows)


if __name__ == "__main__":
    main()
