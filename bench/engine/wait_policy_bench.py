"""OpenMP's wait policy against single-stream decode: the embedded model as ``LLM()`` loads it,
one fresh process per run under each policy (libgomp reads the policy once, when torch loads),
the policies alternated (``bench.common.compare``), medians with the machine's load.

    python -m bench.engine.wait_policy_bench [--rounds 3] [--threads 2] [--max-tokens 128]

Policies: libgomp's default (``GOMP_SPINCOUNT=300000``, the default spin count, so that no
inherited ``OMP_WAIT_POLICY`` applies), ``OMP_WAIT_POLICY=ACTIVE`` and ``PASSIVE``."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from functools import partial

from bench.common import MIN_ROUNDS, compare, median, results, summary, table

POLICIES = {
    "libgomp's default (spin, then sleep)": {"GOMP_SPINCOUNT": "300000"},
    "OMP_WAIT_POLICY=ACTIVE": {"OMP_WAIT_POLICY": "ACTIVE"},
    "OMP_WAIT_POLICY=PASSIVE": {"OMP_WAIT_POLICY": "PASSIVE"},
}
RUN = """
import sys, time
from stencil import LLM, SamplingParams
llm = LLM(num_threads=int(sys.argv[1]), kv_cache_memory=64 << 20)
sp = SamplingParams(max_tokens=int(sys.argv[2]), temperature=0, ignore_eos=True)
llm.generate(["Describe a quiet morning in a small harbour town."], sp, use_tqdm=False)  # warm
t = time.perf_counter()
out = llm.generate(["Tell me about the history of the bicycle."], sp, use_tqdm=False)
print(len(out[0].outputs[0].token_ids) / (time.perf_counter() - t))
"""


def run(env: dict[str, str], threads: int, max_tokens: int) -> float:
    base = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    out = subprocess.run(
        [sys.executable, "-c", RUN, str(threads), str(max_tokens)],
        env={**base, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.split()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=MIN_ROUNDS)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=128)
    args = ap.parse_args()
    runs = compare(
        {name: partial(run, env, args.threads, args.max_tokens) for name, env in POLICIES.items()},
        args.rounds,
    )
    print(
        f"\n{args.threads} threads, {args.max_tokens} greedy tokens; {summary(runs, args.rounds)}\n"
    )
    rows = []
    for name, got in runs.items():
        tok_s = results(got)
        rows.append([name, " / ".join(f"{x:.1f}" for x in tok_s), f"{median(tok_s):.1f}"])
    print(table(["policy", "tok/s per run", "median"], rows))


if __name__ == "__main__":
    main()
