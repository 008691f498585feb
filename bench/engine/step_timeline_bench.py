"""Where engine_bench's run spends its time, by kind of step: the steps that carry prompt tokens,
and decode-only steps grouped by how many sequences they decode (as requests finish, the batch
shrinks and each token costs more: every step streams all the weights).

    python -m bench.engine.step_timeline_bench [--dtype float32|bfloat16] [--shape smollm2|qwen2.5-0.5b]
                                        [--threads 2]

One Stencil run of the engine_bench workload (same engine settings, warmed outside it), each
``step()`` timed with ``perf_counter``; the scheduler's output tells the step's kind.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

from transformers import AutoTokenizer

from bench.common import table
from bench.engine.engine_bench import SHAPES, warmed_stencil
from bench.shapes import qwen_05b_dir
from bench.workload import make_workload
from stencil import SamplingParams, default_model_path

GROUPS = (16, 32, 48, 64)  # decode steps by batch size: 1-16, 17-32, ...


def step_kind(sched) -> str:
    rows = len(sched.scheduled)
    if sched.num_tokens > rows:
        return "with prompt tokens"
    return "decode, " + next(f"{g - 15}-{g} sequences" for g in GROUPS if rows <= g)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="smollm2", choices=sorted(SHAPES))
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    model_dir = default_model_path() if args.shape == "smollm2" else qwen_05b_dir()
    n, prompts, outputs = SHAPES[args.shape]
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    items = make_workload(tokenizer, n=n, prompt_range=prompts, output_range=outputs)
    eng = warmed_stencil(model_dir, items, args.threads, args.dtype).engine
    schedule, seen = eng.scheduler.schedule, []
    eng.scheduler.schedule = lambda *a: seen.append(schedule(*a)) or seen[-1]
    for i, it in enumerate(items):
        params = SamplingParams(temperature=0, max_tokens=it.max_tokens, ignore_eos=True)
        eng.add_request(f"r{i}", it.prompt_ids, params)
    per_kind: dict[str, list[tuple[float, int]]] = defaultdict(list)
    start = time.perf_counter()
    while eng.has_unfinished_requests():
        t = time.perf_counter()
        eng.step()
        per_kind[step_kind(seen[-1])].append((time.perf_counter() - t, len(seen[-1].scheduled)))
    total = time.perf_counter() - start
    rows = []
    for kind in sorted(per_kind):
        steps = per_kind[kind]
        seconds, seqs = sum(s for s, _ in steps), sum(r for _, r in steps)
        rows.append([kind, len(steps), seconds, 100 * seconds / total])
        rows[-1] += [1000 * seconds / len(steps), seqs / len(steps), 1000 * seconds / seqs]
    output = sum(it.max_tokens for it in items)
    print(
        f"\n{args.shape} {args.dtype}, {args.threads} threads: {len(items)} requests, "
        f"{total:.2f} s, {output / total:.1f} output tok/s\n"
    )
    headers = ["steps", "count", "seconds", "% of run", "ms per step", "sequences per step"]
    print(table([*headers, "ms per sequence"], rows))


if __name__ == "__main__":
    main()
