"""schemathesis against /openapi.json, small: 10 fuzzed cases (valid and invalid) per operation
(the six POSTs: chat, completions, responses, embeddings, tokenize, detokenize)
on a tiny random-weight model server; no server error. ``bench/server/schemathesis_bench.py`` runs the
full 200 examples per operation plus the coverage phase."""

from __future__ import annotations

import pytest

pytest.importorskip("schemathesis")
from stencil.testing.schemathesis_run import KEY, run_schemathesis, tiny_model
from stencil.testing.serve_process import start_serve

EXAMPLES = 10


def test_no_server_errors_on_fuzzed_requests(tmp_path):
    model = tiny_model(tmp_path / "tiny")
    with start_serve("--model", str(model), api_key=KEY) as server:
        report = run_schemathesis(
            server.base_url, KEY, EXAMPLES, "fuzzing", seed=7, workers=1,
            out=tmp_path / "report.ndjson",
        )  # fmt: skip
    assert report.server_errors == 0, report.operations
    assert report.exit_code == 0
    posts = {k: v for k, v in report.operations.items() if k.startswith("POST")}
    assert len(posts) == 6 and all(op.cases["fuzzing"] >= EXAMPLES for op in posts.values())
