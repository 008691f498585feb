"""Prometheus text for ``/metrics``: the engine's counters and gauges plus the server's latency
histograms (time to first token, inter-token latency, end-to-end), named like vLLM's with a
``stencil:`` prefix."""

from __future__ import annotations

import bisect
import math
from collections import Counter
from dataclasses import dataclass, field

PREFIX = "stencil:"

# Histogram buckets in seconds, vLLM's.
# fmt: off
_TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
                 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
_ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0,
                7.5, 10.0, 20.0, 40.0, 80.0)
_E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
                60.0, 120.0, 240.0, 480.0, 960.0)
# fmt: on

# engine metric name -> (exported name, help); others are exported as they are.
_RENAMES = {
    "kv_cache_usage": ("kv_cache_usage_perc", "KV-cache usage (1 = full)."),
    "num_requests_running": ("num_requests_running", "Requests in the running batch."),
    "num_requests_waiting": ("num_requests_waiting", "Requests waiting to be scheduled."),
    "num_preemptions_total": ("num_preemptions_total", "Preemptions (by recompute)."),
    "prefix_cache_hits_total": (
        "prefix_cache_hits_total",
        "Prompt tokens served from the prefix cache.",
    ),
    "prompt_tokens_total": ("prompt_tokens_total", "Prefilled prompt tokens."),
    "generation_tokens_total": ("generation_tokens_total", "Generated tokens."),
    "stored_responses": ("stored_responses", "Responses kept for previous_response_id."),
    "stored_response_bytes": ("stored_response_bytes", "JSON bytes the stored responses hold."),
    "stored_response_evictions_total": (
        "stored_response_evictions_total",
        "Stored responses evicted (least recently used first).",
    ),
}


@dataclass(slots=True)
class Histogram:
    buckets: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    n: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.buckets) + 1)

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.total += value
        self.n += 1

    def lines(self, name: str, labels: str) -> list[str]:
        out, acc = [], 0
        for le, c in zip((*self.buckets, math.inf), self.counts, strict=True):
            acc += c
            le_s = "+Inf" if le == math.inf else repr(le)
            out.append(f'{name}_bucket{{{labels},le="{le_s}"}} {acc}')
        out.append(f"{name}_sum{{{labels}}} {self.total}")
        out.append(f"{name}_count{{{labels}}} {self.n}")
        return out


@dataclass(slots=True)
class ServerMetrics:
    """Latency histograms and finished-request counts observed by the HTTP layer (per app)."""

    ttft: Histogram = field(default_factory=lambda: Histogram(_TTFT_BUCKETS))
    itl: Histogram = field(default_factory=lambda: Histogram(_ITL_BUCKETS))
    e2e: Histogram = field(default_factory=lambda: Histogram(_E2E_BUCKETS))
    finished: Counter[str] = field(default_factory=Counter)
    aborted_by_client: int = 0

    def render(self, engine_metrics: dict[str, float], model_name: str) -> str:
        labels = f'model_name="{_escape(model_name)}"'
        lines: list[str] = []
        for key, value in sorted(engine_metrics.items()):
            if not isinstance(value, int | float) or isinstance(value, bool):
                continue
            name, help_ = _RENAMES.get(key, (key, f"Engine metric {key}."))
            full = PREFIX + _sanitize(name)
            kind = "counter" if name.endswith("_total") else "gauge"
            lines += [
                f"# HELP {full} {help_}",
                f"# TYPE {full} {kind}",
                f"{full}{{{labels}}} {float(value)}",
            ]
        for hist, name, help_ in (
            (self.ttft, "time_to_first_token_seconds", "Time to first token."),
            (self.itl, "inter_token_latency_seconds", "Time between streamed tokens."),
            (self.e2e, "e2e_request_latency_seconds", "End-to-end request latency."),
        ):
            full = PREFIX + name
            lines += [f"# HELP {full} {help_}", f"# TYPE {full} histogram"]
            lines += hist.lines(full, labels)
        full = PREFIX + "request_success_total"
        lines += [f"# HELP {full} Finished requests by finish reason.", f"# TYPE {full} counter"]
        for reason, count in sorted(self.finished.items()):
            lines.append(f'{full}{{{labels},finished_reason="{_escape(reason)}"}} {count}')
        full = PREFIX + "request_client_disconnects_total"
        lines += [
            f"# HELP {full} Requests aborted because the client went away.",
            f"# TYPE {full} counter",
            f"{full}{{{labels}}} {self.aborted_by_client}",
        ]
        return "\n".join(lines) + "\n"


def _sanitize(name: str) -> str:
    return "".join(c if c.isalnum() or c in "_:" else "_" for c in name)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
