"""``import stencil``: OpenMP's team threads sleep between parallel regions (libgomp's wait policy
PASSIVE, as libgomp itself reports it with ``OMP_DISPLAY_ENV``) unless the environment already
chose a wait policy or a spin count; processes started from there get the user's environment."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

PROBE = """
import os, subprocess, sys
import stencil, torch
child = subprocess.run([sys.executable, "-c", "import os; print(os.environ.get('OMP_WAIT_POLICY'))"],
                       capture_output=True, text=True, env=os.environ)
print(os.environ.get('OMP_WAIT_POLICY'), child.stdout.strip(), torch.get_num_threads())
"""


@pytest.mark.parametrize(
    ("env", "libgomp", "seen"),
    [
        ({}, "PASSIVE", "None"),  # this process sleeps; its children see no policy of Stencil's
        ({"OMP_WAIT_POLICY": "active"}, "ACTIVE", "active"),
        ({"GOMP_SPINCOUNT": "300000"}, None, "None"),  # the user's spin count, no policy set
    ],
)
def test_openmp_wait_policy(env, libgomp, seen):
    base = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        env={**base, **env, "OMP_NUM_THREADS": "2", "OMP_DISPLAY_ENV": "true"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-3:] == [seen, seen, "2"]
    reported = re.findall(r"OMP_WAIT_POLICY = '(\w+)'", out.stdout + out.stderr)
    assert reported, "libgomp printed no environment"
    if libgomp is not None:
        assert reported[0] == libgomp
    assert "Invalid value" not in out.stderr  # libgomp accepted what it read
