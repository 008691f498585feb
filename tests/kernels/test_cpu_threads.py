"""cpu_threads.bind_threads: pins the caller's OpenMP team one thread per allowed CPU, only when
the threads cover every allowed CPU. Each case runs in a child process (pinning is per process)."""

import os
import subprocess
import sys

import pytest

CHILD = """
import os, sys, torch
from stencil.kernels.cpu_threads import bind_threads
os.sched_setaffinity(0, {cpus})
torch.set_num_threads({threads})
pinned = bind_threads({threads})
tasks = [sorted(os.sched_getaffinity(int(t))) for t in os.listdir("/proc/self/task")]
print(pinned, sorted(os.sched_getaffinity(0)), {cpus_second} in tasks)
"""


def _run(cpus: set[int], threads: int) -> str:
    code = CHILD.format(cpus=cpus, threads=threads, cpus_second=[max(cpus)])
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout.strip()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_bind_threads_pins_one_thread_per_allowed_cpu() -> None:
    cpus = set(sorted(os.sched_getaffinity(0))[:2])
    # the caller is team thread 0, on the first allowed CPU alone; a pool thread on the second
    assert _run(cpus, 2) == f"True [{min(cpus)}] True"


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_bind_threads_leaves_fewer_threads_than_cpus_alone() -> None:
    cpus = set(sorted(os.sched_getaffinity(0))[:2])
    assert _run(cpus, 1) == f"False {sorted(cpus)} False"
