"""The pure parts of ``stencil serve --replicas``: the routing text of a request, rendezvous
ranking of replicas, and merging every replica's Prometheus text (checked by prometheus_client's
parser)."""

from __future__ import annotations

import json
from collections import Counter
from types import SimpleNamespace

import pytest

from stencil.api.ray.ingress import PREFIX_CHARS, merge_metrics, prompt_text
from stencil.api.ray.routing import rank_replicas


@pytest.mark.parametrize(
    ("body", "want"),
    [
        ({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]},
         "system:S\nuser:U\n"),
        ({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"},
                                                     {"type": "image_url"}]}]}, "user:a\n"),
        ({"prompt": "complete me"}, "complete me"),
        ({"prompt": [[1, 2, 3], [4]]}, "[[1, 2, 3]]"),
        ({"input": "embed me"}, ""),
        ([1, 2], ""),
    ],
)  # fmt: skip
def test_prompt_text(body, want):
    assert prompt_text(json.dumps(body).encode()) == want


def test_prompt_text_is_a_prefix_and_survives_bad_bodies():
    long = {"messages": [{"role": "user", "content": "x" * 5000}]}
    assert prompt_text(json.dumps(long).encode()) == ("user:" + "x" * 5000)[:PREFIX_CHARS]
    assert prompt_text(b"{not json") == prompt_text(b"") == prompt_text(b"\xff\xfe") == ""


def _replicas(n: int) -> list[SimpleNamespace]:
    return [SimpleNamespace(replica_id=SimpleNamespace(unique_id=f"r{i}")) for i in range(n)]


def test_rendezvous_ranking_is_stable_and_spreads():
    replicas = _replicas(4)
    prompts = [f"prompt {i}" for i in range(400)]
    top = {p: rank_replicas(p, replicas)[0] for p in prompts}
    assert all(rank_replicas(p, list(reversed(replicas)))[0] is top[p] for p in prompts)
    counts = Counter(r.replica_id.unique_id for r in top.values())
    assert len(counts) == 4 and min(counts.values()) > 50  # ~100 each
    # a replica leaves: only the prompts it held move
    gone = replicas[1]
    rest = [r for r in replicas if r is not gone]
    moved = [p for p in prompts if rank_replicas(p, rest)[0] is not top[p]]
    assert all(top[p] is gone for p in moved) and len(moved) == counts["r1"]


REPLICA_TEXT = """# HELP stencil:num_requests_running Requests in the running batch.
# TYPE stencil:num_requests_running gauge
stencil:num_requests_running{model_name="m"} {running}
# HELP stencil:time_to_first_token_seconds Time to first token.
# TYPE stencil:time_to_first_token_seconds histogram
stencil:time_to_first_token_seconds_bucket{model_name="m",le="0.1"} {early}
stencil:time_to_first_token_seconds_bucket{model_name="m",le="+Inf"} {total}
stencil:time_to_first_token_seconds_count{model_name="m"} {total}
stencil:time_to_first_token_seconds_sum{model_name="m"} 1.5
# TYPE process_open_fds gauge
process_open_fds 7
"""


def test_merged_metrics_parse_with_every_replica_labelled():
    from prometheus_client.parser import text_string_to_metric_families

    texts = [
        ("a", REPLICA_TEXT.replace("{running}", "2").replace("{early}", "1").replace("{total}", "3")),
        ("b", REPLICA_TEXT.replace("{running}", "5").replace("{early}", "0").replace("{total}", "4")),
    ]  # fmt: skip
    families = {f.name: f for f in text_string_to_metric_families(merge_metrics(texts))}
    assert set(families) == {
        "stencil:num_requests_running",
        "stencil:time_to_first_token_seconds",
        "process_open_fds",
    }
    running = {
        s.labels["replica"]: s.value for s in families["stencil:num_requests_running"].samples
    }
    assert running == {"a": 2.0, "b": 5.0}
    counts = {s.labels["replica"]: s.value for s in families["stencil:time_to_first_token_seconds"].samples
              if s.name.endswith("_count")}  # fmt: skip
    assert counts == {"a": 3.0, "b": 4.0}
    fds = families["process_open_fds"].samples
    assert [(s.labels, s.value) for s in fds] == [({"replica": "a"}, 7.0), ({"replica": "b"}, 7.0)]


def test_autoscaling_flag_inline_or_file(tmp_path):
    from stencil.api.ray.serve import load_autoscaling
    from stencil.engine.errors import ConfigError

    config = {"min_replicas": 1, "max_replicas": 4, "target_ongoing_requests": 8}
    assert load_autoscaling(json.dumps(config)) == config
    (tmp_path / "scale.json").write_text(json.dumps(config))
    assert load_autoscaling(str(tmp_path / "scale.json")) == config
    assert load_autoscaling(None) is None
    for bad, words in [
        ('{"min_replicas": 3, "max_replicas": 1}', "max_replicas"),
        ('{"min_replicas": -1}', "min_replicas"),
        ("{oops", "not valid JSON"),
        (str(tmp_path / "missing.json"), "cannot read"),
    ]:
        with pytest.raises(ConfigError, match=words):
            load_autoscaling(bad)
