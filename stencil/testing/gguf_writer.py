"""Write an HF state dict (Llama, Qwen2 and the families of ``gguf_metadata``) as a llama.cpp GGUF
file, each tensor in a chosen type.

For tests and benchmarks (model files with known weights in every type Stencil reads): the
architecture metadata comes from the HF config, the tokenizer fields are copied from another GGUF
file (the embedded SmolLM2's), and llama.cpp's transforms are applied (q/k row permutation,
Gemma's norms stored as 1 + w)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from stencil.engine.models.gguf_arch import (
    GLOBAL_NAMES,
    NORM_SHIFT_ARCHS,
    PERMUTED_ARCHS,
    layer_names,
)
from stencil.testing.gguf_encode import encode
from stencil.testing.gguf_metadata import gguf_arch, write_metadata

FLOAT_TYPES = ("F32", "F16", "BF16")


@dataclass(frozen=True, slots=True)
class Encoded:
    """A tensor already in GGUF blocks (``data``: uint8 [N, row bytes] of type ``qtype``), written
    as it is: for files too large to hold as float32 first (a 7B model's random blocks)."""

    qtype: str
    data: np.ndarray


def gguf_tensor_name(hf: str, arch: str = "llama") -> str:
    """``model.layers.3.self_attn.q_proj.weight`` -> ``blk.3.attn_q.weight``."""
    stem, kind = hf.rsplit(".", 1)
    if stem.startswith("model.layers."):
        _, _, i, rest = stem.split(".", 3)
        names = {v: k for k, v in layer_names(arch).items()}
        return f"blk.{i}.{names[rest]}.{kind}"
    return f"{ {v: k for k, v in GLOBAL_NAMES.items()}[stem] }.{kind}"


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
    tokenizer_gguf: Path | list,
) -> None:
    """``state``: HF names -> float32 arrays (or ``Encoded`` blocks); ``qtype_of(name, shape)``:
    a GGML type name (1-D tensors are always written F32)."""
    import gguf

    arch = gguf_arch(config)
    writer = gguf.GGUFWriter(str(path), arch)
    extra = write_metadata(writer, config)
    _copy_tokenizer(writer, tokenizer_gguf, config.vocab_size)
    for name, w in extra.items():
        writer.add_tensor(name, w)
    for name, w in state.items():
        if isinstance(w, Encoded):
            kind = gguf.GGMLQuantizationType[w.qtype]
            writer.add_tensor(gguf_tensor_name(name, arch), w.data, raw_dtype=kind)
            continue
        w = np.asarray(w, dtype=np.float32)
        if arch in NORM_SHIFT_ARCHS and name.endswith("norm.weight"):
            w = w + 1  # the converter stores Gemma's 1 + w
        if arch in PERMUTED_ARCHS and name.endswith(("q_proj.weight", "k_proj.weight")):
            heads = config.num_attention_heads if "q_proj" in name else config.num_key_value_heads
            w = llama_cpp_permute(w, heads)
        qtype = "F32" if w.ndim == 1 else qtype_of(name, w.shape)
        if qtype == "F32":
            writer.add_tensor(gguf_tensor_name(name, arch), w)
        else:
            kind = gguf.GGMLQuantizationType[qtype]
            writer.add_tensor(gguf_tensor_name(name, arch), encode(w, qtype), raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def read_tokenizer_fields(source: Path) -> list[tuple[str, object, list]]:
    """A GGUF file's tokenizer fields as ``(key, value, types)``: read once, write many files
    (parsing a 49k-token vocabulary takes seconds)."""
    import gguf

    reader = gguf.GGUFReader(str(source))
    return [
        (key, field.contents(), list(field.types))
        for key, field in reader.fields.items()
        if key.startswith("tokenizer.")
    ]


def _copy_tokenizer(writer, source, vocab_size: int) -> None:
    """The source's tokenizer fields (a GGUF path, or ``read_tokenizer_fields``' list); a larger
    model vocabulary gets placeholder tokens."""
    import gguf

    fields = read_tokenizer_fields(source) if isinstance(source, Path) else source
    for key, value, types in fields:
        if key == "tokenizer.ggml.tokens":
            value = value + [f"<|extra_{i}|>" for i in range(len(value), vocab_size)]
        elif key == "tokenizer.ggml.token_type":
            value = value + [int(gguf.TokenType.NORMAL)] * (vocab_size - len(value))
        kind = types[0]
        if kind == gguf.GGUFValueType.ARRAY:
            writer.add_key_value(key, value, kind, sub_type=types[-1])
        else:
            writer.add_key_value(key, value, kind)
