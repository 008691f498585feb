"""Write a mixture-of-experts HF state dict (Qwen2-MoE, Qwen3-MoE, Mixtral, GPT-OSS) as the GGUF
file llama.cpp's converter makes of it: experts stacked ``[E, out, in]`` per projection, llama.cpp's
tensor names and MoE metadata, each tensor in a chosen type (MXFP4 included). For tests and
benchmarks; the tokenizer fields are copied from another GGUF file."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np

from stencil.engine.errors import ConfigError
from stencil.engine.models.gguf_arch import GLOBAL_NAMES, LAYER_NAMES, PERMUTED_ARCHS
from stencil.testing.gguf_encode import encode
from stencil.testing.gguf_writer import Encoded, _copy_tokenizer, llama_cpp_permute

GGUF_ARCHS = {
    "qwen2_moe": "qwen2moe",
    "qwen3_moe": "qwen3moe",
    "mixtral": "llama",
    "gpt_oss": "gpt-oss",
}
_EXPERT = re.compile(r"layers\.(\d+)\.(?:mlp|block_sparse_moe)\.experts\.(\d+)\.(\w+)\.weight")
_PROJ = {"gate_proj": "gate", "up_proj": "up", "down_proj": "down", "w1": "gate", "w3": "up"}
_PROJ["w2"] = "down"
_MOE_NAMES = {
    "mlp.gate": "ffn_gate_inp",
    "block_sparse_moe.gate": "ffn_gate_inp",
    "mlp.router": "ffn_gate_inp",
    "mlp.shared_expert.gate_proj": "ffn_gate_shexp",
    "mlp.shared_expert.up_proj": "ffn_up_shexp",
    "mlp.shared_expert.down_proj": "ffn_down_shexp",
    "mlp.shared_expert_gate": "ffn_gate_inp_shexp",
}


def gguf_moe_tensors(config, state: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """HF names -> llama.cpp names and layouts (float32 arrays, experts stacked)."""
    kind = config.model_type
    layer_names = {v: k for k, v in LAYER_NAMES.items()}
    global_names = {v: k for k, v in GLOBAL_NAMES.items()}
    out: dict[str, np.ndarray] = {}
    experts: dict[tuple[int, str], dict[int, np.ndarray]] = {}
    for name, w in state.items():
        if isinstance(w, Encoded):
            out[name] = w  # already a llama.cpp name and blocks
            continue
        w = np.asarray(w, dtype=np.float32)
        m = _EXPERT.search(name)
        if m:
            experts.setdefault((int(m[1]), _PROJ[m[3]]), {})[int(m[2])] = w
            continue
        stem, leaf = name.rsplit(".", 1)
        layer = re.match(r"model\.layers\.(\d+)\.(.+)", stem)
        if layer is None:
            out[f"{global_names[stem]}.{leaf}"] = w
            continue
        i, rest = layer[1], layer[2]
        blk = f"blk.{i}"
        if kind == "gpt_oss" and rest == "mlp.experts":
            out.update(_gpt_oss_experts(blk, leaf, w))
        elif rest == "self_attn" and leaf == "sinks":
            out[f"{blk}.attn_sinks.weight"] = w
        elif kind == "gpt_oss" and rest == "post_attention_layernorm":
            out[f"{blk}.post_attention_norm.{leaf}"] = w
        elif rest in _MOE_NAMES:
            out[f"{blk}.{_MOE_NAMES[rest]}.{leaf}"] = (
                w.reshape(-1) if "shared_expert_gate" in rest else w
            )
        else:
            out[f"{blk}.{layer_names[rest]}.{leaf}"] = w
    for (i, proj), per in experts.items():
        out[f"blk.{i}.ffn_{proj}_exps.weight"] = np.stack([per[e] for e in range(len(per))])
    return out


def _gpt_oss_experts(blk: str, leaf: str, w: np.ndarray) -> dict[str, np.ndarray]:
    """HF's stacked ``gate_up_proj [E, H, 2I]`` (gate/up interleaved), ``down_proj [E, I, H]``."""
    if leaf == "gate_up_proj":
        g, u = w[..., ::2], w[..., 1::2]
        return {
            f"{blk}.ffn_gate_exps.weight": g.transpose(0, 2, 1).copy(),
            f"{blk}.ffn_up_exps.weight": u.transpose(0, 2, 1).copy(),
        }
    if leaf == "gate_up_proj_bias":
        return {
            f"{blk}.ffn_gate_exps.bias": w[..., ::2].copy(),
            f"{blk}.ffn_up_exps.bias": w[..., 1::2].copy(),
        }
    if leaf == "down_proj":
        return {f"{blk}.ffn_down_exps.weight": w.transpose(0, 2, 1).copy()}
    return {f"{blk}.ffn_down_exps.bias": w}


def write_moe_gguf(
    path: Path,
    config,
    state: dict[str, np.ndarray],
    qtype_of: Callable[[str, tuple[int, ...]], str],
    tokenizer_gguf: Path | list,
) -> None:
    """``state``: HF names -> float32 arrays (or llama.cpp-named ``Encoded`` blocks);
    ``qtype_of(gguf_name, shape)``: a GGML type name (1-D tensors are always F32)."""
    import gguf

    if config.model_type not in GGUF_ARCHS:
        raise ConfigError(f"not a mixture-of-experts config: {config.model_type!r}")
    arch = GGUF_ARCHS[config.model_type]
    writer = gguf.GGUFWriter(str(path), arch)
    _write_metadata(writer, config, arch)
    _copy_tokenizer(writer, tokenizer_gguf, config.vocab_size)
    for name, w in gguf_moe_tensors(config, state).items():
        if isinstance(w, Encoded):
            writer.add_tensor(name, w.data, raw_dtype=gguf.GGMLQuantizationType[w.qtype])
            continue
        if arch in PERMUTED_ARCHS and name.endswith(("attn_q.weight", "attn_k.weight")):
            heads = config.num_attention_heads if "attn_q" in name else config.num_key_value_heads
            w = llama_cpp_permute(w, heads)
        qtype = "F32" if w.ndim == 1 or name.endswith(".bias") else qtype_of(name, w.shape)
        if qtype == "F32":
            writer.add_tensor(name, w)
            continue
        blocks = encode(w.reshape(-1, w.shape[-1]), qtype)
        writer.add_tensor(
            name, blocks.reshape(*w.shape[:-1], -1), raw_dtype=gguf.GGMLQuantizationType[qtype]
        )
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _write_metadata(writer, config, arch: str) -> None:
    import gguf

    kind = config.model_type
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_dimension_count(head_dim)
    params = getattr(config, "rope_parameters", None) or {}
    writer.add_rope_freq_base(float(params.get("rope_theta", 1e4)))
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_vocab_size(config.vocab_size)
    writer.add_expert_used_count(config.num_experts_per_tok)
    if kind.startswith("qwen"):
        writer.add_feed_forward_length(config.intermediate_size)
        writer.add_expert_count(config.num_experts)
        writer.add_expert_feed_forward_length(config.moe_intermediate_size)
        if getattr(config, "shared_expert_intermediate_size", 0):
            writer.add_expert_shared_feed_forward_length(config.shared_expert_intermediate_size)
        return
    writer.add_expert_count(config.num_local_experts)
    writer.add_feed_forward_length(config.intermediate_size)
    if kind == "gpt_oss":
        writer.add_expert_feed_forward_length(config.intermediate_size)
        writer.add_sliding_window(config.sliding_window)
        if params.get("rope_type") == "yarn":
            writer.add_rope_scaling_type(gguf.RopeScalingType.YARN)
            writer.add_rope_scaling_factor(float(params["factor"]))
            writer.add_rope_scaling_orig_ctx_len(int(params["original_max_position_embeddings"]))
