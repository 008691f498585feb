"""Self CPU time of a ``torch.profiler`` trace, summed per op category. Imported by
``profile_bench.py`` (Stencil) and ``vllm_profile_runner.py`` (inside vLLM's venv), so both
engines' traces are cut the same way. Torch only: no Stencil or vLLM imports.

An event's category is that of its nearest labelled ancestor (``record_function("lm_head")`` /
``("sampling")`` around the engine's logits and sampler calls), else its own name's. Everything
the profiler did not see (Python between ops: scheduling, metadata, output processing) is the
wall time minus the summed self times.
"""

from __future__ import annotations

from torch.profiler import record_function

CATEGORIES = [
    "linears",
    "lm_head",
    "attention",
    "norms / rotary / activations",
    "KV writes",
    "sampling / logits processing",
    "other torch ops",
    "compiled-graph glue",
]
LABELS = {"lm_head": "lm_head", "sampling": "sampling / logits processing"}

# substrings of op names, first match wins (Stencil's C ops are labelled ``stencil::<op>``).
# Inductor's fused kernels (``cpp_fused_...``) name the nodes they fuse, a neighbouring
# ``onednn_mm`` included: they are the elementwise work between the GEMMs (norms, rotary,
# SiLU * mul, residual adds, the embedding gather)
_BY_NAME = [
    ("norms / rotary / activations", ("cpp_fused",)),
    ("KV writes", ("write_kv", "reshape_and_cache")),
    ("attention", ("paged_attention", "cpu_attention", "cpu_attn", "attention")),
    (
        "linears",
        (
            "aten::linear",
            "aten::addmm",
            "aten::mm",
            "aten::matmul",
            "aten::bmm",
            "_linear_pointwise",
            "mkldnn_linear",
            "onednn_mm",
            "weight_packed_linear",
            "quant_linear",
            "stencil::linear",
        ),
    ),
    (
        "norms / rotary / activations",
        ("rms_norm", "rotary", "silu", "aten::mul", "aten::rsqrt", "aten::pow"),
    ),
    ("compiled-graph glue", ("Torch-Compiled Region", "CompiledFxGraph", "CompiledFunction")),
]


def name_category(name: str) -> str:
    for cat, keys in _BY_NAME:
        if any(k in name for k in keys):
            return cat
    return "other torch ops"


def categorize(events) -> tuple[dict[str, float], dict[str, float]]:
    """``events`` = ``prof.events()``. Returns (ms per category, ms per op name: the top ops)."""
    per_cat = dict.fromkeys(CATEGORIES, 0.0)
    per_op: dict[str, float] = {}
    for ev in events:
        if ev.device_type.name != "CPU" and str(ev.device_type) != "DeviceType.CPU":
            continue
        ms = ev.self_cpu_time_total / 1000
        cat, node = None, ev
        while node is not None and cat is None:
            cat = LABELS.get(node.name)
            node = node.cpu_parent
        cat = cat or name_category(ev.name)
        per_cat[cat] += ms
        per_op[ev.name] = per_op.get(ev.name, 0.0) + ms
    return per_cat, dict(sorted(per_op.items(), key=lambda kv: -kv[1])[:25])


def labelled(label: str, fn):
    """``fn`` wrapped in ``record_function(label)``: a label the trace (and ``categorize``) sees."""

    def call(*args, **kwargs):
        with record_function(label):
            return fn(*args, **kwargs)

    return call
