"""``import stencil``: OpenMP's team threads sleep between parallel regions (``OMP_WAIT_POLICY``
PASSIVE) unless the environment already chose a wait policy or a spin count."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = (
    "import os, stencil, torch; print(os.environ.get('OMP_WAIT_POLICY'), torch.get_num_threads())"
)


@pytest.mark.parametrize(
    ("env", "policy"),
    [
        ({}, "PASSIVE"),
        ({"OMP_WAIT_POLICY": "active"}, "active"),
        ({"GOMP_SPINCOUNT": "10000"}, "None"),  # a spin count of the user's own is kept as is
    ],
)
def test_openmp_wait_policy(env, policy):
    base = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        env={**base, **env, "OMP_NUM_THREADS": "2"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == [policy, "2"]
    assert "Invalid value" not in out.stderr  # libgomp accepted what it read
