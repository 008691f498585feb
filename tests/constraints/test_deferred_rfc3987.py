"""rfc3987-syntax's stand-in (``stencil.constraints.deferred_rfc3987``): a process importing
``stencil.constraints`` (and with it jsonschema) does not build rfc3987-syntax's parser, keeps
jsonschema's ``iri`` / ``iri-reference`` checks, and they answer as rfc3987-syntax itself (loaded
on the first check). In a fresh interpreter: the test process has loaded everything already."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

VALUES = ["http://example.com/a?b#c", "https://例え.jp/パス", "a b", "//host/p", "rel/path", ":"]
CHECK = """
import json, sys
import stencil.constraints, jsonschema
stand_in = sys.modules["rfc3987_syntax"]
deferred = "rfc3987_syntax.syntax_helpers" not in sys.modules
checker, values = jsonschema.FormatChecker(), json.loads(sys.argv[1])
ours = {f: [checker.conforms(v, f) for v in values] for f in ("iri", "iri-reference")}
import rfc3987_syntax
real = {f: [rfc3987_syntax.is_valid_syntax(f.replace("-", "_"), v) for v in values]
        for f in ("iri", "iri-reference")}
print(json.dumps([deferred, rfc3987_syntax is not stand_in, ours, real]))
"""


def test_iri_checks_answer_as_rfc3987_syntax_loaded_on_first_use():
    pytest.importorskip("rfc3987_syntax")
    proc = subprocess.run(
        [sys.executable, "-c", CHECK, json.dumps(VALUES)], capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    deferred, replaced, ours, real = json.loads(proc.stdout)
    assert deferred, "importing stencil.constraints built rfc3987-syntax's parser"
    assert replaced, "the first check did not load rfc3987-syntax"
    assert ours == real and False in real["iri"] and True in real["iri"], (ours, real)
