"""Where a step's time goes, two ways over one instrumented run of the engine_bench workload:

``--by phases``: the host time of each phase of ``LLMEngine.step()`` (each phase's method wrapped
on the instance with ``perf_counter``, nothing in the engine changed), per decode step (every row
decodes) and per step that carries prompt tokens, ms per step, medians over the steps. The outputs
have one fixed length (``--max-tokens``) so the decode steps run all ``--requests`` sequences at
once. "metadata" is ``ModelRunner.execute`` minus the model's forward and the lm_head; "step -
phases" is what no wrapped phase covers. The wrappers cost ~1 µs per call.

``--by kinds``: the run's time by kind of step (the steps that carry prompt tokens, and decode-only
steps grouped by how many sequences they decode: as requests finish, the batch shrinks and each
token costs more), over engine_bench's own output lengths.

    python -m bench.engine.step_bench [--by phases|kinds] [--dtype float32|bfloat16]
        [--shape smollm2|qwen2.5-0.5b|host-twin] [--threads 2] [--requests 64] [--max-tokens 128]
        [--repeat 1] [--prompts 32 256] [--model qwen2.5-coder-1.5b|FILE.gguf]

``--model`` a real GGUF file (``stencil.testing.real_models``' names, or a path) instead of a
shape, kept quantized: ``--requests 1`` gives one request's decode step.

``--shape host-twin`` is SmolLM2's layer stack with every width cut to a few numbers
(``shapes.host_twin_dir``): quicker and steadier for the phases outside the forward (at 1 thread,
short prompts: ``--prompts 8 16``).
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from pathlib import Path

from bench.common import median, table
from bench.engine.engine_bench import SHAPES, warmed_stencil
from bench.shapes import host_twin_dir, qwen_05b_dir
from bench.workload import make_workload
from stencil import SamplingParams, default_model_path

PHASES = ["admit", "schedule", "metadata", "forward", "lm_head", "guided", "sampler"]
PHASES += ["after_step", "output", "collect"]
GROUPS = (16, 32, 48, 64)  # decode steps by batch size: 1-16, 17-32, ...


class PhaseTimer:
    """Seconds per phase of the current step; ``wrap`` times every call of a callable."""

    def __init__(self) -> None:
        self.now: dict[str, float] = defaultdict(float)
        self.sched = None  # the step's SchedulerOutput

    def wrap(self, name: str, fn):
        def timed(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.now[name] += time.perf_counter() - t

        return timed


def instrument(eng, timer: PhaseTimer) -> None:
    runner, model = eng.runner, eng.runner.model
    eng._admit_compiled = timer.wrap("admit", eng._admit_compiled)
    schedule = timer.wrap("schedule", eng.scheduler.schedule)

    def keep(*args):
        timer.sched = schedule(*args)
        return timer.sched

    eng.scheduler.schedule = keep
    runner.execute = timer.wrap("execute", runner.execute)
    model.forward = timer.wrap("forward", model.forward)
    model.compute_logits = timer.wrap("lm_head", model.compute_logits)
    eng.guided.apply = timer.wrap("guided", eng.guided.apply)
    eng.sampler = timer.wrap("sampler", eng.sampler)
    eng.scheduler.after_step = timer.wrap("after_step", eng.scheduler.after_step)
    eng.output.append = timer.wrap("output", eng.output.append)
    eng._collect = timer.wrap("collect", eng._collect)


def step_kind(sched, requests: int) -> tuple[str, str]:
    """(phase table's kind, kinds table's group) of a step."""
    rows = len(sched.scheduled)
    if sched.num_tokens > rows:
        return "prefill", "with prompt tokens"
    group = "decode, " + next(f"{g - 15}-{g} sequences" for g in GROUPS if rows <= g)
    return ("decode" if rows == requests else "other"), group


def run(model_dir, items, args) -> tuple[dict, dict, float]:
    """One instrumented run: per phase-table kind each phase's ms in every step of that kind;
    per kinds-table group the (seconds, sequences) of each step; the run's seconds."""
    eng = warmed_stencil(model_dir, items, args.threads, args.dtype).engine
    timer = PhaseTimer()
    instrument(eng, timer)
    for i, it in enumerate(items):
        max_tokens = args.max_tokens or it.max_tokens
        params = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
        eng.add_request(f"r{i}", it.prompt_ids, params)
    phases: dict[str, dict[str, list[float]]] = {}
    groups: dict[str, list[tuple[float, int]]] = defaultdict(list)
    start = time.perf_counter()
    while eng.has_unfinished_requests():
        timer.now.clear()
        t = time.perf_counter()
        eng.step()
        total = time.perf_counter() - t
        ph = dict(timer.now)
        ph["metadata"] = ph.get("execute", 0.0) - ph.get("forward", 0.0) - ph.get("lm_head", 0.0)
        ph["step"] = total
        ph["step - phases"] = total - sum(ph.get(p, 0.0) for p in PHASES)
        kind, group = step_kind(timer.sched, len(items))
        for name, sec in ph.items():
            phases.setdefault(kind, defaultdict(list))[name].append(sec * 1000)
        groups[group].append((total, len(timer.sched.scheduled)))
    return phases, groups, time.perf_counter() - start


def phase_table(merged: dict[str, dict[str, list[float]]]) -> str:
    names = [*PHASES, "step - phases", "step"]
    kinds = [k for k in ("decode", "prefill") if k in merged]
    rows = [[n, *(median(merged[k].get(n, [0.0])) for k in kinds)] for n in names]
    counts = [f"{k} ms/step (median of {len(merged[k]['step'])} steps)" for k in kinds]
    return table(["phase", *counts], rows)


def kinds_table(groups: dict[str, list[tuple[float, int]]], total: float) -> str:
    rows = []
    for group in sorted(groups):
        steps = groups[group]
        seconds, seqs = sum(s for s, _ in steps), sum(r for _, r in steps)
        rows.append([group, len(steps), seconds, 100 * seconds / total])
        rows[-1] += [1000 * seconds / len(steps), seqs / len(steps), 1000 * seconds / seqs]
    headers = ["steps", "count", "seconds", "% of run", "ms per step", "sequences per step"]
    return table([*headers, "ms per sequence"], rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--by", default="phases", choices=["phases", "kinds"])
    ap.add_argument("--shape", default="smollm2", choices=["smollm2", "qwen2.5-0.5b", "host-twin"])
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--requests", type=int, default=None, help="default: the shape's workload")
    ap.add_argument(
        "--max-tokens", type=int, default=None, help="one output length (phases default: 128)"
    )
    ap.add_argument("--repeat", type=int, default=1, help="engines built and run in turn")
    ap.add_argument("--prompts", type=int, nargs=2, default=None, help="prompt length range")
    ap.add_argument("--model", default=None, help="a real GGUF file: a name or a path")
    args = ap.parse_args()
    if args.by == "phases" and args.max_tokens is None:
        args.max_tokens = 128
    from transformers import AutoTokenizer

    n, prompts, outputs = SHAPES["qwen2.5-0.5b" if args.shape == "qwen2.5-0.5b" else "smollm2"]
    if args.model:
        from stencil.testing.real_models import REAL_MODELS, real_model_path

        model_dir = real_model_path(args.model) if args.model in REAL_MODELS else Path(args.model)
        tokenizer = AutoTokenizer.from_pretrained(str(model_dir.parent), gguf_file=model_dir.name)
        args.shape = model_dir.name
    else:
        dirs = {
            "smollm2": default_model_path,
            "qwen2.5-0.5b": qwen_05b_dir,
            "host-twin": host_twin_dir,
        }
        model_dir = dirs[args.shape]()
        tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    items = make_workload(
        tokenizer, n=args.requests or n, prompt_range=args.prompts or prompts, output_range=outputs
    )
    merged: dict[str, dict[str, list[float]]] = {}
    for _ in range(args.repeat):
        phases, groups, total = run(model_dir, items, args)
        for kind, by_phase in phases.items():
            for name, ms in by_phase.items():
                merged.setdefault(kind, defaultdict(list))[name] += ms
    if args.by == "phases":
        print(phase_table(merged))
        return
    output = sum(args.max_tokens or it.max_tokens for it in items)
    print(
        f"\n{args.shape} {args.dtype}, {args.threads} threads: {len(items)} requests, "
        f"{total:.2f} s, {output / total:.1f} output tok/s (last run)\n"
    )
    print(kinds_table(groups, total))


if __name__ == "__main__":
    main()
