"""llama.cpp's mixture-of-experts GGUF files: tensor names, stacked experts split per expert, the
MoE config fields from the metadata (Mixtral is llama.cpp's ``llama`` with ``expert_count``).

A stacked expert tensor ``blk.N.ffn_{gate,up,down}_exps`` is ``[E, out, in]``: each expert's
slice is decoded on its own, so it stays in the file's quantization (MXFP4 included) and becomes
one ``mlp.experts.{e}`` linear."""

from __future__ import annotations

import re

from stencil.engine.errors import ConfigError

# llama.cpp per-layer names -> HF-style names (beside gguf.LAYER_NAMES)
MOE_LAYER_NAMES = {
    "ffn_gate_inp": "mlp.router",
    "ffn_gate_inp_shexp": "mlp.shared_expert_gate",
    "ffn_gate_shexp": "mlp.shared_expert.gate_proj",
    "ffn_up_shexp": "mlp.shared_expert.up_proj",
    "ffn_down_shexp": "mlp.shared_expert.down_proj",
    "ffn_gate_exps": "mlp.experts.gate_proj",
    "ffn_up_exps": "mlp.experts.up_proj",
    "ffn_down_exps": "mlp.experts.down_proj",
    "attn_sinks": "self_attn.sinks",
    "post_attention_norm": "post_attention_layernorm",  # GPT-OSS (no ffn_norm)
}
_STACKED = re.compile(r"(model\.layers\.\d+\.mlp\.experts)\.(\w+)\.(weight|bias)")
# GGUF architecture -> transformers model_type of its MoE form
MOE_ARCHS = {"qwen2moe": "qwen2_moe", "qwen3moe": "qwen3_moe", "gpt-oss": "gpt_oss"}


def split_experts(name: str, data):
    """``(name, data)`` per expert for a stacked expert tensor (``data``: a list of per-expert
    weights, or an array ``[E, ...]``); other tensors pass through unchanged."""
    m = _STACKED.fullmatch(name)
    if m is None:
        yield name, data
        return
    for e, part in enumerate(data):
        yield f"{m[1]}.{e}.{m[2]}.{m[3]}", part


def moe_config(config, fields: dict, tensor_names: set[str]):
    """``config`` (transformers' reading of the GGUF metadata) completed with the MoE fields it
    does not read; a llama file with experts becomes a MixtralConfig. ``fields``: the metadata
    (key -> value), ``tensor_names``: the file's tensor names."""
    arch = fields["general.architecture"]
    experts = fields.get(f"{arch}.expert_count")
    if not experts:
        return config
    if arch == "llama":
        from transformers import MixtralConfig

        raw = config.to_dict()
        for key in ("model_type", "architectures", "transformers_version"):
            raw.pop(key, None)
        config = MixtralConfig(**raw)
        config.num_local_experts = int(experts)
    elif arch not in MOE_ARCHS:
        raise ConfigError(f"unsupported GGUF mixture-of-experts architecture {arch!r}")
    config.num_experts_per_tok = int(fields[f"{arch}.expert_used_count"])
    expert_ff = fields.get(f"{arch}.expert_feed_forward_length")
    layers = range(config.num_hidden_layers)
    if arch in ("qwen2moe", "qwen3moe"):
        config.num_experts = int(experts)
        config.moe_intermediate_size = int(expert_ff)
        config.shared_expert_intermediate_size = int(
            fields.get(f"{arch}.expert_shared_feed_forward_length", 0)
        )
        config.norm_topk_prob = arch == "qwen3moe"  # llama.cpp's choice for each
        config.mlp_only_layers = [
            i for i in layers if f"blk.{i}.ffn_gate_inp.weight" not in tensor_names
        ]
        config.decoder_sparse_step = 1
        if arch == "qwen2moe":
            config.qkv_bias = "blk.0.attn_q.bias" in tensor_names
    if arch == "gpt-oss":
        config.intermediate_size = int(expert_ff or config.intermediate_size)
        config.attention_bias = "blk.0.attn_q.bias" in tensor_names
        config.head_dim = int(fields.get("gpt-oss.attention.key_length", config.head_dim))
        config.sliding_window = int(fields.get("gpt-oss.attention.sliding_window", 128))
        config.layer_types = [
            "sliding_attention" if i % 2 == 0 else "full_attention" for i in layers
        ]  # llama.cpp: swa pattern 2
        config.rope_parameters = _gpt_oss_rope(fields)
    return config


def gpt_oss_config(fields: dict, vocab_size: int):
    """A GptOssConfig from a gpt-oss GGUF file's metadata (transformers' own GGUF reader cannot
    read its rope scaling fields); ``moe_config`` completes it. ``vocab_size``: the embedding's
    rows, where the metadata does not say."""
    from transformers import GptOssConfig

    def get(key: str, default=None):
        return fields.get(f"gpt-oss.{key}", default)

    return GptOssConfig(
        vocab_size=int(get("vocab_size", vocab_size)),
        hidden_size=int(get("embedding_length")),
        num_hidden_layers=int(get("block_count")),
        num_attention_heads=int(get("attention.head_count")),
        num_key_value_heads=int(get("attention.head_count_kv")),
        head_dim=int(get("attention.key_length")),
        intermediate_size=int(get("expert_feed_forward_length")),
        num_local_experts=int(get("expert_count")),
        num_experts_per_tok=int(get("expert_used_count")),
        max_position_embeddings=int(get("context_length")),
        rms_norm_eps=float(get("attention.layer_norm_rms_epsilon")),
        rope_parameters=_gpt_oss_rope(fields),
    )


def _gpt_oss_rope(fields: dict) -> dict:
    params = {
        "rope_type": "default",
        "rope_theta": float(fields.get("gpt-oss.rope.freq_base", 1e4)),
    }
    kind = fields.get("gpt-oss.rope.scaling.type")
    if kind in (None, "none"):
        return params
    if kind != "yarn":
        raise ConfigError(f"gpt-oss GGUF: rope scaling {kind!r} is not supported")
    return {
        **params,
        "rope_type": "yarn",
        "factor": float(fields["gpt-oss.rope.scaling.factor"]),
        "original_max_position_embeddings": int(
            fields["gpt-oss.rope.scaling.original_context_length"]
        ),
        "beta_fast": 32.0,
        "beta_slow": 1.0,
        "truncate": False,
    }
