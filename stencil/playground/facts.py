"""The model and server facts panel: what ``/metrics`` and ``/v1/models`` know, in words."""

from __future__ import annotations

from typing import Any

from stencil.api.state import AppState, version


def server_facts(state: AppState) -> dict[str, Any]:
    """``{"facts": [[label, words], ...], "values": {...}}`` for the loaded model and the server
    now; the engine's own details (family, quantization, KV blocks) where it exposes them."""
    engine = state.engine
    m = engine.get_metrics()
    inner = getattr(engine, "engine", None)  # AsyncLLMEngine's LLMEngine
    hf_config = getattr(inner, "hf_config", None)
    config = getattr(inner, "config", None)
    path = str(getattr(inner, "model_path", "") or "")
    values: dict[str, Any] = {
        "model": state.model_name,
        "family": _family(hf_config),
        "quantization": _quantization(config, path),
        "dtype": _dtype(inner),
        "context_length": int(engine.max_model_len),
        "vocab_size": int(engine.vocab_size),
        "kv_cache_usage": float(m.get("kv_cache_usage", 0.0)),
        "kv_cache_tokens": _kv_tokens(inner),
        "requests_running": int(m.get("num_requests_running", 0)),
        "requests_waiting": int(m.get("num_requests_waiting", 0)),
        "prompt_tokens_total": int(m.get("prompt_tokens_total", 0)),
        "generation_tokens_total": int(m.get("generation_tokens_total", 0)),
        "jump_forward_tokens_total": int(m.get("jump_forward_tokens_total", 0)),
        "prefix_cache_hits_total": int(m.get("prefix_cache_hits_total", 0)),
        "guided_mask_seconds_total": float(m.get("guided_mask_seconds_total", 0.0)),
        "version": version(),
    }
    return {"facts": _words(values), "values": values}


def _words(v: dict[str, Any]) -> list[list[str]]:
    kv = f"{v['kv_cache_usage']:.1%} in use"
    if v["kv_cache_tokens"]:
        kv += f" of {v['kv_cache_tokens']:,} token slots"
    generated = v["generation_tokens_total"]
    forced = v["jump_forward_tokens_total"]
    share = f" ({forced / generated:.0%} forced by constraints)" if generated else ""
    return [
        ["Model", v["model"]],
        ["Family", v["family"] or "unknown"],
        ["Weights", f"{v['quantization']}, computed in {v['dtype'] or 'the default dtype'}"],
        ["Context", f"{v['context_length']:,} tokens; vocabulary {v['vocab_size']:,}"],
        ["KV cache", kv],
        ["Requests", f"{v['requests_running']} running, {v['requests_waiting']} waiting"],
        [
            "Tokens so far",
            f"{v['prompt_tokens_total']:,} prompt, {generated:,} generated{share}; "
            f"{v['prefix_cache_hits_total']:,} prefix-cache hits",
        ],
        ["Mask time so far", f"{v['guided_mask_seconds_total']:.3f} s"],
        ["Stencil", v["version"]],
    ]


def _family(hf_config: Any) -> str:
    if hf_config is None:
        return ""
    arch = ", ".join(getattr(hf_config, "architectures", None) or [])
    kind = getattr(hf_config, "model_type", "") or ""
    return f"{kind} ({arch})" if arch else kind


def _quantization(config: Any, path: str) -> str:
    chosen = getattr(config, "quantization", None)
    if chosen:
        return "dequantized (none)" if chosen == "none" else f"{chosen} weight-only"
    return "GGUF, kept as stored" if path.endswith(".gguf") else "unquantized"


def _dtype(inner: Any) -> str:
    model = getattr(getattr(inner, "runner", None), "model", None)
    try:
        return str(next(model.parameters()).dtype).removeprefix("torch.")
    except (AttributeError, StopIteration, TypeError):
        return ""


def _kv_tokens(inner: Any) -> int:
    blocks = getattr(inner, "block_manager", None)
    size = getattr(getattr(inner, "config", None), "block_size", 0)
    return int(getattr(blocks, "num_blocks", 0) * size)
