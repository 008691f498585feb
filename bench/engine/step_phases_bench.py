"""Where a step's host time goes: the phases of ``LLMEngine.step()`` timed with ``perf_counter``
(each phase's method wrapped on the instance, nothing in the engine changed), per decode step (every
row decodes) and per step that carries prompt tokens, ms per step, medians over the steps.

    python -m bench.engine.step_phases_bench [--requests 64] [--max-tokens 128] [--threads 2]
                                      [--dtype float32|bfloat16] [--repeat 1]
                                      [--shape smollm2|host-twin] [--prompts 32 256]

The workload is engine_bench's prompts with one fixed output length, so the decode steps run all
``--requests`` sequences at once (steps with fewer, as requests end, are not shown). "metadata"
is ``ModelRunner.execute`` minus the model's forward and the lm_head; "step - phases" is what no
wrapped phase covers (``step()``'s own glue). The
wrappers cost ~1 µs per call (``output`` is called once per row). ``--shape host-twin`` is
SmolLM2's layer stack with every width cut to a few numbers (``shapes.host_twin_dir``): quicker
and steadier for the phases outside the forward (at 1 thread, short prompts: ``--prompts 8 16``).
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

from bench.common import median, table
from bench.engine.engine_bench import SHAPES, warmed_stencil
from bench.shapes import host_twin_dir
from bench.workload import make_workload
from stencil import SamplingParams, default_model_path

PHASES = ["admit", "schedule", "metadata", "forward", "lm_head", "guided", "sampler"]
PHASES += ["after_step", "output", "collect"]


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


def run(model_dir, items, args) -> dict[str, dict[str, list[float]]]:
    """Per kind of step, each phase's ms in every step of that kind: "decode" (every request
    decodes one token), "prefill" (the step carries prompt tokens), "other" (fewer decodes)."""
    llm = warmed_stencil(model_dir, items, args.threads, args.dtype)
    eng = llm.engine
    timer = PhaseTimer()
    instrument(eng, timer)
    for i, it in enumerate(items):
        params = SamplingParams(temperature=0, max_tokens=args.max_tokens, ignore_eos=True)
        eng.add_request(f"r{i}", it.prompt_ids, params)
    steps: dict[str, dict[str, list[float]]] = {}
    while eng.has_unfinished_requests():
        timer.now.clear()
        t = time.perf_counter()
        eng.step()
        total = time.perf_counter() - t
        ph = dict(timer.now)
        ph["metadata"] = ph.get("execute", 0.0) - ph.get("forward", 0.0) - ph.get("lm_head", 0.0)
        ph["step"] = total
        ph["step - phases"] = total - sum(ph.get(p, 0.0) for p in PHASES)
        rows, tokens = len(timer.sched.scheduled), timer.sched.num_tokens
        kind = "prefill" if tokens > rows else "decode" if rows == len(items) else "other"
        for name, sec in ph.items():
            steps.setdefault(kind, defaultdict(list))[name].append(sec * 1000)
    return steps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--repeat", type=int, default=1, help="engines built and run in turn")
    ap.add_argument("--shape", default="smollm2", choices=["smollm2", "host-twin"])
    ap.add_argument("--prompts", type=int, nargs=2, default=None, help="prompt length range")
    args = ap.parse_args()
    from transformers import AutoTokenizer

    model_dir = default_model_path() if args.shape == "smollm2" else host_twin_dir()
    _, prompts, outputs = SHAPES["smollm2"]
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    prompts = args.prompts or prompts
    items = make_workload(tok, n=args.requests, prompt_range=prompts, output_range=outputs)
    merged: dict[str, dict[str, list[float]]] = {}
    for _ in range(args.repeat):
        for kind, phases in run(model_dir, items, args).items():
            for name, ms in phases.items():
                merged.setdefault(kind, defaultdict(list))[name] += ms
    names = [*PHASES, "step - phases", "step"]
    kinds = [k for k in ("decode", "prefill") if k in merged]
    rows = [[n, *(median(merged[k].get(n, [0.0])) for k in kinds)] for n in names]
    counts = [f"{k} ms/step (median of {len(merged[k]['step'])} steps)" for k in kinds]
    print(table(["phase", *counts], rows))


if __name__ == "__main__":
    main()
