"""Single-stream latency with and without speculative decoding (``speculative_config`` ngram),
one engine of each in this process, same model, both warmed on a prompt outside the workload,
prefix caching on for both, runs alternated (plain, speculative, plain, ...) by
``bench.common.compare``, medians with the machine's load.

Workloads (greedy, max_tokens 256):
- ``grounded``: one request at a time per document of ``examples/`` with its library schema,
  strings / numbers / dates grounded in the document (what ``stencil extract`` asks, with the
  document's drafts lent as ``stencil extract`` lends them: ``DocumentProposer``); outputs must
  be identical with and without speculation; the acceptance rate is reported;
- ``extract``: ``stencil extract``'s in-process path on the same documents, one document at a
  time (``EngineExtractor``, one question per top-level field over the shared document prefix,
  then the record); the records must be identical;
- ``chat``: free chat answers, one at a time, EOS honoured;
- ``throughput``: 16 and 64 concurrent chat requests (max_tokens 64), speculation as configured
  (auto-disabled above ``disable_by_batch_size``);
- ``ceiling``: the grounded set and ``stencil extract`` beside a speculative engine whose drafts
  are the plain engine's own outputs, k tokens a step (forced tokens counted in k): what chain
  speculation gives on this machine with every draft right, the bound for any drafter at that k;
- ``threshold``: grounded documents at 1, 2, 4, 8, 16 concurrent requests with speculation forced on,
  the measurement behind the ``disable_by_batch_size`` default (``--method draft_model``: with the
  draft model's engines below);
- ``draft_model``: ``"method": "draft_model"``: the target loaded with ``--target-quantization``
  (default "none": the embedded SmolLM2 dequantized to fp32) beside the same target drafted for by
  ``--draft`` (default: the embedded Q4_1 GGUF file, kept quantized); the grounded set and free
  chat, one at a time, outputs must be identical.

    python -m bench.engine.latency_bench [--workloads grounded extract chat throughput ceiling
        threshold]
        [--rounds 3] [--k 5] [--threads 2] [--model PATH]
    python -m bench.engine.latency_bench --workloads draft_model [--draft PATH] [--k 4]
    python -m bench.engine.latency_bench --workloads threshold --method draft_model --k 4
"""

from __future__ import annotations

import argparse
import json
import time
from functools import partial
from pathlib import Path

from bench.common import MIN_ROUNDS, compare, median, results, smoke_note, table
from stencil import LLM, SamplingParams
from stencil.constraints import Constraint, DocumentIndex
from stencil.extract.document_proposer import DocumentProposer
from stencil.extract.engine_backend import EngineExtractor, ExtractSpec
from stencil.extract.prompt import PromptTemplate, field_list
from stencil.extract.records import Job

ROOT = Path(__file__).resolve().parents[2]
DOCS = ["invoice", "contact", "person", "receipt", "purchase_order", "event", "support_ticket"]
CHATS = [
    "Tell me about the history of the bicycle.",
    "How do I make a good cup of tea?",
    "Why is the sky blue? Explain it simply.",
    "Give me some tips for learning a new language.",
]
OUTSIDE = "Describe a quiet morning in a small harbour town."


def grounded_requests(max_tokens: int) -> list[tuple[list[dict], SamplingParams]]:
    out = []
    for name in DOCS:
        doc = next((ROOT / "examples").glob(f"{name}.*")).read_text()
        schema = json.loads((ROOT / "stencil/extract/schemas" / f"{name}.json").read_text())
        ask = f"Extract the {name.replace('_', ' ')} as JSON with these fields:\n"
        msgs = [{"role": "user", "content": f"{ask}{field_list(schema)}\n\nDocument:\n{doc}"}]
        c = Constraint.json_schema(
            schema,
            whitespace="compact",
            source_text=doc,
            ground_strings=True,
            ground_numbers=True,
            ground_dates=True,
        )
        lent = DocumentProposer(DocumentIndex(doc))  # what ``stencil extract`` lends its drafts
        params = SamplingParams(temperature=0, max_tokens=max_tokens, constraint=c, proposer=lent)
        out.append((msgs, params))
    return out


def extract_jobs(max_tokens: int) -> list[tuple[ExtractSpec, Job]]:
    """What ``stencil extract --schema NAME FILE`` runs for each document (per-field default)."""
    out = []
    for i, name in enumerate(DOCS):
        path = next((ROOT / "examples").glob(f"{name}.*"))
        schema = json.loads((ROOT / "stencil/extract/schemas" / f"{name}.json").read_text())
        spec = ExtractSpec(schema, PromptTemplate.load(None), max_tokens=max_tokens)
        out.append((spec, Job(i, str(path), path.read_text())))
    return out


def run_extract(llm: LLM, jobs) -> dict:
    """Extract the documents one at a time, as ``stencil extract`` does for each file."""
    m0 = llm.get_metrics()
    tokens, outs = 0, []
    t = time.perf_counter()
    for spec, job in jobs:
        for outcome in EngineExtractor(llm, spec).run([job]):
            outs.append(outcome.text or outcome.error)
            tokens += outcome.completion_tokens
    return _result(llm, m0, tokens, outs, time.perf_counter() - t)


def chat_requests(max_tokens: int, n: int) -> list[tuple[list[dict], SamplingParams]]:
    return [
        (
            [{"role": "user", "content": CHATS[i % len(CHATS)] + f" (Answer {i})"}],
            SamplingParams(temperature=0, max_tokens=max_tokens),
        )
        for i in range(n)
    ]


class StepLog:
    """Every step of ``llm``'s engine that runs a forward: (rows, seconds of the whole step),
    for ``fit``: the engine's step and its model runner wrapped on the instance."""

    def __init__(self, llm: LLM) -> None:
        self.steps: list[tuple[int, float]] = []
        eng, rows = llm.engine, [0]
        execute, step = eng.runner.execute, eng.step

        def counted(sched):
            rows[0] = sched.num_tokens
            return execute(sched)

        def timed():
            rows[0], t = 0, time.perf_counter()
            out = step()
            if rows[0]:
                self.steps.append((rows[0], time.perf_counter() - t))
            return out

        eng.runner.execute, eng.step = counted, timed


def fit(steps: list[tuple[int, float]], max_rows: int = 16) -> list:
    """[steps, rows, a ms, b ms, a / b]: least squares of a step's time = a + b * rows over the
    steps of at most ``max_rows`` rows (decode and verification; prefills left out)."""
    pts = [(r, s * 1000) for r, s in steps if r <= max_rows]
    n, sx, sy = len(pts), sum(r for r, _ in pts), sum(ms for _, ms in pts)
    sxx, sxy = sum(r * r for r, _ in pts), sum(r * ms for r, ms in pts)
    b = (n * sxy - sx * sy) / (n * sxx - sx * sx) if n * sxx != sx * sx else 0.0
    a = (sy - b * sx) / n if n else 0.0
    return [n, sx, a, b, a / b if b > 0 else float("inf")]


def run(llm: LLM, reqs, concurrent: int) -> dict:
    """Time ``reqs`` in groups of ``concurrent`` (1: one at a time)."""
    m0 = llm.get_metrics()
    tokens, outs = 0, []
    t = time.perf_counter()
    for lo in range(0, len(reqs), concurrent):
        group = reqs[lo : lo + concurrent]
        res = llm.chat([g[0] for g in group], [g[1] for g in group], use_tqdm=False)
        outs += [r.outputs[0].token_ids for r in res]
        tokens += sum(len(r.outputs[0].token_ids) for r in res)
    return _result(llm, m0, tokens, outs, time.perf_counter() - t)


def _result(llm: LLM, m0: dict, tokens: int, outs: list, dt: float) -> dict:
    m1 = llm.get_metrics()
    drafted = m1["spec_decode_num_draft_tokens_total"] - m0["spec_decode_num_draft_tokens_total"]
    acc = m1["spec_decode_num_accepted_tokens_total"] - m0["spec_decode_num_accepted_tokens_total"]
    return {
        "tok_s": tokens / dt,
        "tokens": tokens,
        "outs": outs,
        "drafted": drafted,
        "accepted": acc,
    }


def on_engines(engines: dict[str, LLM], reqs, concurrent: int, rounds: int, fn=None) -> dict:
    """``rounds`` runs of each (warmed) engine on ``reqs``, alternated (``bench.common.compare``);
    ``fn(llm, reqs)`` (default: ``run`` at ``concurrent``)."""
    work = fn or (lambda llm, reqs: run(llm, reqs, concurrent))
    return compare({name: partial(work, llm, reqs) for name, llm in engines.items()}, rounds)


def row(label: str, runs: dict[str, list], check_identical: bool) -> list:
    loads = [r.load for r in runs["plain"] + runs["spec"]]
    plain, spec = results(runs["plain"]), results(runs["spec"])
    a, b = median([r["tok_s"] for r in plain]), median([r["tok_s"] for r in spec])
    drafted = sum(r["drafted"] for r in spec)
    rate = sum(r["accepted"] for r in spec) / drafted if drafted else 0.0
    same = "-"
    if check_identical:
        same = "yes" if all(r["outs"] == plain[0]["outs"] for r in plain + spec) else "NO"
    return [
        label,
        " / ".join(f"{r['tok_s']:.1f}" for r in plain),
        " / ".join(f"{r['tok_s']:.1f}" for r in spec),
        f"{b / a:.2f}x",
        f"{rate:.0%}",
        same,
        f"{min(loads):.1f}-{max(loads):.1f}",
    ]


def engines(args, spec: dict) -> dict[str, LLM]:
    kw = dict(num_threads=args.threads, max_model_len=2048, kv_cache_memory=512 << 20)
    out = {"plain": LLM(args.model, **kw), "spec": LLM(args.model, speculative_config=spec, **kw)}
    warm = [([{"role": "user", "content": OUTSIDE}], SamplingParams(temperature=0, max_tokens=32))]
    for llm in out.values():
        run(llm, warm, 1)
    return out


class PerfectDrafts:
    """A drafter's ``drafts(seq)`` that proposes the next ``k`` tokens of the output the plain
    engine wrote for the same prompt: every draft right (the ceiling)."""

    def __init__(self, outputs: dict[tuple[int, ...], list[int]], k: int) -> None:
        self.outputs, self.k = outputs, k

    def __call__(self, seq) -> list[int]:
        want = self.outputs.get(tuple(seq.token_ids[: seq.prompt_len]), [])
        done = seq.num_tokens - seq.prompt_len
        room = seq.max_len - seq.num_tokens - 1
        return want[done : done + max(0, min(self.k, room))]


def ceiling_rows(args, spec: dict) -> list[list]:
    """The grounded set and ``stencil extract``'s questions: plain beside perfect drafts
    (``PerfectDrafts``, from the plain engine's outputs of a first run), alternated."""
    eng = engines(args, spec)
    outputs = finished_outputs(eng["plain"])
    reqs, jobs = grounded_requests(args.max_tokens), extract_jobs(args.max_tokens)
    run(eng["plain"], reqs, 1)
    run_extract(eng["plain"], jobs)
    eng["spec"].engine.drafter.drafts = PerfectDrafts(outputs, args.k)
    runs = on_engines(eng, reqs, 1, args.rounds)
    rows = [row(f"perfect drafts (ceiling), grounded, {len(DOCS)} docs", runs, True)]
    runs = on_engines(eng, jobs, 1, args.rounds, run_extract)
    return rows + [row(f"perfect drafts (ceiling), stencil extract, {len(DOCS)} docs", runs, True)]


def finished_outputs(llm: LLM) -> dict[tuple[int, ...], list[int]]:
    """Prompt tokens -> output tokens of every request ``llm``'s engine finishes from now on
    (its ``step`` wrapped on the instance)."""
    outputs: dict[tuple[int, ...], list[int]] = {}
    step = llm.engine.step

    def recorded():
        outs = step()
        for out in outs:
            if out.finished:
                outputs[tuple(out.prompt_token_ids)] = list(out.outputs[0].token_ids)
        return outs

    llm.engine.step = recorded
    return outputs


def draft_engines(args, disable_by_batch_size: int = 8) -> dict[str, LLM]:
    """(plain target, target drafted for by the draft model), both warmed."""
    from stencil.engine.models.default_model import default_model_file

    draft = args.draft or str(default_model_file())
    spec = {
        "method": "draft_model",
        "model": draft,
        "num_speculative_tokens": args.k,
        "disable_by_batch_size": disable_by_batch_size,
    }
    kw = dict(
        num_threads=args.threads,
        max_model_len=2048,
        kv_cache_memory=512 << 20,
        quantization=None if args.target_quantization == "as-stored" else args.target_quantization,
    )
    out = {"plain": LLM(args.model, **kw), "spec": LLM(args.model, speculative_config=spec, **kw)}
    warm = [([{"role": "user", "content": OUTSIDE}], SamplingParams(temperature=0, max_tokens=32))]
    for llm in out.values():
        run(llm, warm, 1)
    return out


def draft_rows(args) -> list[list]:
    eng = draft_engines(args)
    runs = on_engines(eng, grounded_requests(args.max_tokens), 1, args.rounds)
    rows = [row(f"draft model: grounded extraction, {len(DOCS)} docs", runs, True)]
    runs = on_engines(eng, chat_requests(args.max_tokens, 2), 1, args.rounds)
    rows.append(row("draft model: free chat, 2 answers", runs, True))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="model path (default: the embedded SmolLM2)")
    ap.add_argument("--workloads", nargs="+", default=["grounded", "chat", "throughput"])
    ap.add_argument("--rounds", type=int, default=MIN_ROUNDS)
    ap.add_argument("--k", type=int, default=5, help="num_speculative_tokens")
    ap.add_argument("--lookup-max", type=int, default=4)
    ap.add_argument("--lookup-min", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--method",
        default="ngram",
        choices=["ngram", "draft_model"],
        help="threshold: the speculative method measured",
    )
    ap.add_argument("--draft", default=None, help="draft_model: the draft (default: embedded Q4_1)")
    ap.add_argument(
        "--target-quantization",
        default="none",
        help="draft_model: the target's quantization ('as-stored': None)",
    )
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument(
        "--concurrency",
        type=int,
        nargs="+",
        default=[1, 2, 4, 8, 16],
        help="threshold: concurrent requests",
    )
    args = ap.parse_args()
    spec = {
        "method": "ngram",
        "num_speculative_tokens": args.k,
        "prompt_lookup_max": args.lookup_max,
        "prompt_lookup_min": args.lookup_min,
    }
    rows = []
    if set(args.workloads) - {"threshold", "draft_model", "ceiling"}:
        eng = engines(args, spec)
        if "grounded" in args.workloads:
            logs = {name: StepLog(llm) for name, llm in eng.items()}
            runs = on_engines(eng, grounded_requests(args.max_tokens), 1, args.rounds)
            rows.append(row(f"grounded extraction, {len(DOCS)} docs, 1 at a time", runs, True))
            costs = [[name, *fit(log.steps)] for name, log in logs.items()]
        if "extract" in args.workloads:
            jobs = extract_jobs(args.max_tokens)
            runs = on_engines(eng, jobs, 1, args.rounds, run_extract)
            rows.append(row(f"stencil extract, {len(DOCS)} docs, 1 at a time", runs, True))
        if "chat" in args.workloads:
            runs = on_engines(eng, chat_requests(args.max_tokens, 2), 1, args.rounds)
            rows.append(row("free chat, 2 answers, 1 at a time", runs, True))
        if "throughput" in args.workloads:
            for n in (16, 64):
                runs = on_engines(eng, chat_requests(64, n), n, args.rounds)
                rows.append(row(f"{n} concurrent chat requests", runs, False))
        del eng
    if "ceiling" in args.workloads:
        rows += ceiling_rows(args, spec)
    if "threshold" in args.workloads:
        if args.method == "draft_model":
            eng = draft_engines(args, 1 << 20)
        else:
            eng = engines(args, {**spec, "disable_by_batch_size": 1 << 20})
        reqs = grounded_requests(args.max_tokens)
        for c in args.concurrency:
            runs = on_engines(eng, (reqs * 16)[: max(c, len(reqs))], c, args.rounds)
            rows.append(row(f"grounded, {c} concurrent, speculation forced on", runs, False))
    if "draft_model" in args.workloads or args.method == "draft_model":
        rows += draft_rows(args) if "draft_model" in args.workloads else []
        spec = {
            "method": "draft_model",
            "num_speculative_tokens": args.k,
            "model": args.draft or "embedded Q4_1",
            "target quantization": args.target_quantization,
        }
    print(
        f"speculative_config {spec}, {args.threads} threads, {args.rounds} rounds alternated"
        + smoke_note(args.rounds)
    )
    heads = [
        "workload",
        "plain tok/s per run",
        "speculative tok/s per run",
        "speculative / plain",
        "acceptance",
        "outputs identical",
        "load (1 min)",
    ]
    print(table(heads, rows))
    if "grounded" in args.workloads:
        print(
            "\nGrounded set, every round: a step's time fitted as a + b * rows (STEP_ROWS = a / b)"
        )
        heads = ["engine", "steps (<= 16 rows)", "rows", "a ms", "b ms per row", "a / b"]
        print(table(heads, costs))


if __name__ == "__main__":
    main()
