"""Write a Llama/Qwen2 HF state dict as a llama.cpp GGUF file, each tensor in a chosen type.

For tests and benchmarks (model files with known weights in every type Stencil reads): the
architecture metadata comes from the HF config, the tokenizer fields are copied from another GGUF
file (the embedded SmolLM2's), and llama.cpp's q/k row permutation is applied for llama."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from stencil.engine.errors import ConfigError
from stencil.engine.models.gguf import GGUF_NAMES, PERMUTED_ARCHS
from stencil.testing.gguf_encode import encode

FLOAT_TYPES = ("F32", "F16", "BF16")


@dataclass(frozen=True, slots=True)
class Encoded:
    """A tensor already in GGUF blocks (``data``: uint8 [N, row bytes] of type ``qtype``), written
    as it is: for files too large to hold as float32 first (a 7B model's random blocks)."""

    qtype: str
    data: np.ndarray


def gguf_tensor_name(hf: str) -> str:
    """``model.layers.3.self_attn.q_proj.weight`` -> ``blk.3.attn_q.weight``."""
    stem, kind = hf.rsplit(".", 1)
    if stem.startswith("model.layers."):
        _, _, i, rest = stem.split(".", 3)
        return f"blk.{i}.{GGUF_NAMES[rest]}.{kind}"
    return f"{GGUF_NAMES[stem]}.{kind}"


def llama_cpp_permute(w: np.ndarray, heads: int) -> np.ndarray:
    """convert_hf_to_gguf.py's LlamaModel.permute (interleave each head's rotary halves)."""
    return (
        w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
    )


def write_model_gguf(
    path: Path,
    config,
    state: dict[str, np.ndarray],
    qtype_of: Callable[[str, tuple[int, ...]], str],
    tokenizer_gguf: Path,
) -> None:
    """``state``: HF names -> float32 arrays (or ``Encoded`` blocks); ``qtype_of(name, shape)``:
    a GGML type name (1-D tensors are always written F32)."""
    import gguf

    arch = config.model_type
    if arch not in ("llama", "qwen2"):
        raise ConfigError(f"cannot write GGUF metadata for {arch!r}")
    writer = gguf.GGUFWriter(str(path), arch)
    head_dim = config.hidden_size // config.num_attention_heads
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_rope_dimension_count(head_dim)
    params = getattr(config, "rope_parameters", None) or {}
    writer.add_rope_freq_base(float(params.get("rope_theta", getattr(config, "rope_theta", 1e4))))
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_vocab_size(config.vocab_size)
    _copy_tokenizer(writer, tokenizer_gguf, config.vocab_size)
    for name, w in state.items():
        if isinstance(w, Encoded):
            kind = gguf.GGMLQuantizationType[w.qtype]
            writer.add_tensor(gguf_tensor_name(name), w.data, raw_dtype=kind)
            continue
        w = np.asarray(w, dtype=np.float32)
        if arch in PERMUTED_ARCHS and name.endswith(("q_proj.weight", "k_proj.weight")):
            heads = config.num_attention_heads if "q_proj" in name else config.num_key_value_heads
            w = llama_cpp_permute(w, heads)
        qtype = "F32" if w.ndim == 1 else qtype_of(name, w.shape)
        if qtype == "F32":
            writer.add_tensor(gguf_tensor_name(name), w)
        else:
            kind = gguf.GGMLQuantizationType[qtype]
            writer.add_tensor(gguf_tensor_name(name), encode(w, qtype), raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _copy_tokenizer(writer, source: Path, vocab_size: int) -> None:
    """The source's tokenizer fields; a larger model vocabulary gets placeholder tokens."""
    import gguf

    reader = gguf.GGUFReader(str(source))
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        value = field.contents()
        if key == "tokenizer.ggml.tokens":
            value = value + [f"<|extra_{i}|>" for i in range(len(value), vocab_size)]
        elif key == "tokenizer.ggml.token_type":
            value = value + [int(gguf.TokenType.NORMAL)] * (vocab_size - len(value))
        kind = field.types[0]
        if kind == gguf.GGUFValueType.ARRAY:
            writer.add_key_value(key, value, kind, sub_type=field.types[-1])
        else:
            writer.add_key_value(key, value, kind)
