"""The engine's metrics, one object for every component that counts: the engine, the scheduler,
the guided stage and output processing all add to the same ``EngineMetrics``; ``snapshot`` adds
the gauges of the moment. ``LLM.get_metrics()`` and the server's ``/metrics`` read that snapshot,
under Prometheus-style names."""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(slots=True)
class EngineMetrics:
    """Monotonic counters (``*_total``), written only on the engine's own threads."""

    prompt_tokens_total: float = 0.0
    generation_tokens_total: float = 0.0
    jump_forward_tokens_total: float = 0.0
    requests_finished_total: float = 0.0
    num_preemptions_total: float = 0.0
    constraint_compile_seconds_total: float = 0.0
    constraint_compiles_total: float = 0.0
    guided_mask_seconds_total: float = 0.0
    guided_mask_rows_total: float = 0.0
    spec_decode_num_draft_tokens_total: float = 0.0
    spec_decode_num_accepted_tokens_total: float = 0.0

    def snapshot(
        self, *, running: int, waiting: int, kv_cache_usage: float, prefix_cache_hits: int
    ) -> dict[str, float]:
        """Every counter plus the gauges passed in, as one flat ``name -> value`` dict."""
        out = {
            "num_requests_running": float(running),
            "num_requests_waiting": float(waiting),
            "kv_cache_usage": float(kv_cache_usage),
            "prefix_cache_hits_total": float(prefix_cache_hits),
        }
        out.update({f.name: float(getattr(self, f.name)) for f in fields(self)})
        return out
