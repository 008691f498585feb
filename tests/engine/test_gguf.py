"""GGUF weights read with the ``gguf`` package: llama.cpp's tensor names and its q/k row
permutation undone, checked against the HF state dict the file was written from."""

from __future__ import annotations

import gguf
import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

from stencil.engine.models.gguf import hf_tensor_name, read_gguf_tensors, unpermute_rotary

TINY = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=96,
    max_position_embeddings=128,
)


def llama_cpp_permute(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp convert_hf_to_gguf.py's LlamaModel.permute (interleave each head's halves)."""
    return (
        w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
    )


def gguf_name(hf: str) -> str:
    table = {
        "model.embed_tokens": "token_embd",
        "model.norm": "output_norm",
        "lm_head": "output",
        "input_layernorm": "attn_norm",
        "post_attention_layernorm": "ffn_norm",
        "self_attn.q_proj": "attn_q",
        "self_attn.k_proj": "attn_k",
        "self_attn.v_proj": "attn_v",
        "self_attn.o_proj": "attn_output",
        "mlp.gate_proj": "ffn_gate",
        "mlp.up_proj": "ffn_up",
        "mlp.down_proj": "ffn_down",
    }
    stem, kind = hf.rsplit(".", 1)
    if stem.startswith("model.layers."):
        _, _, i, rest = stem.split(".", 3)
        return f"blk.{i}.{table[rest]}.{kind}"
    return f"{table[stem]}.{kind}"


def write_gguf(path, arch: str, state: dict[str, np.ndarray], config, qtype) -> None:
    writer = gguf.GGUFWriter(str(path), arch)
    for name, w in state.items():
        if arch == "llama" and name.endswith(("q_proj.weight", "k_proj.weight")):
            heads = config.num_attention_heads if "q_proj" in name else config.num_key_value_heads
            w = llama_cpp_permute(w, heads)
        if w.ndim == 2 and qtype != gguf.GGMLQuantizationType.F32:
            writer.add_tensor(gguf_name(name), gguf.quants.quantize(w, qtype), raw_dtype=qtype)
        else:
            writer.add_tensor(gguf_name(name), w)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
@pytest.mark.parametrize("qtype", [gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.Q8_0])
def test_tensors_come_back_under_hf_names_unpermuted(tmp_path, arch, qtype):
    torch.manual_seed(0)
    if arch == "llama":
        config = LlamaConfig(**TINY, tie_word_embeddings=False)
        model = LlamaForCausalLM(config)
    else:
        config = Qwen2Config(**TINY, tie_word_embeddings=False)
        model = Qwen2ForCausalLM(config)
    state = {k: v.float().numpy() for k, v in model.state_dict().items()}
    write_gguf(tmp_path / "m.gguf", arch, state, config, qtype)
    got = read_gguf_tensors(tmp_path / "m.gguf", config)
    assert set(got) == set(state)
    for name, w in state.items():
        want = w
        if w.ndim == 2 and qtype != gguf.GGMLQuantizationType.F32:
            want = gguf.quants.dequantize(gguf.quants.quantize(w, qtype), qtype)
        np.testing.assert_array_equal(got[name], want, err_msg=name)


def test_unpermute_inverts_llama_cpp_permute():
    w = np.arange(8 * 16 * 3, dtype=np.float32).reshape(8 * 16, 3)
    assert not np.array_equal(llama_cpp_permute(w, 8), w)
    np.testing.assert_array_equal(unpermute_rotary(llama_cpp_permute(w, 8), 8), w)


@pytest.mark.parametrize(
    ("name", "hf"),
    [
        ("blk.3.attn_q.weight", "model.layers.3.self_attn.q_proj.weight"),
        ("blk.0.attn_k.bias", "model.layers.0.self_attn.k_proj.bias"),
        ("blk.1.attn_k_norm.weight", "model.layers.1.self_attn.k_norm.weight"),
        ("token_embd.weight", "model.embed_tokens.weight"),
        ("output.weight", "lm_head.weight"),
        ("rope_freqs.weight", None),
        ("blk.2.unknown.weight", None),
    ],
)
def test_tensor_names(name, hf):
    assert hf_tensor_name(name) == hf


CONFIG_FIELDS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                 "num_attention_heads", "num_key_value_heads", "max_position_embeddings",
                 "rms_norm_eps", "rope_parameters", "bos_token_id", "eos_token_id")  # fmt: skip


def test_a_qwen2_config_built_here_is_transformers_own(tmp_path, gguf_tokenizer_fields):
    """Qwen2's config comes from the header (``gguf_arch.PLAIN_CONFIGS``) instead of transformers'
    reader of the whole file: the same fields."""
    from transformers import AutoConfig

    from stencil.engine.models.gguf import gguf_model_dir
    from stencil.testing.gguf_writer import write_model_gguf

    config = Qwen2Config(**{**TINY, "vocab_size": 49152}, rope_theta=1e6, rms_norm_eps=1e-6)
    state = {k: v.numpy() for k, v in Qwen2ForCausalLM(config).state_dict().items()}
    path = tmp_path / "qwen2.gguf"
    write_model_gguf(path, config, state, lambda n, s: "F32", gguf_tokenizer_fields)
    ours = AutoConfig.from_pretrained(gguf_model_dir(path))
    theirs = AutoConfig.from_pretrained(str(tmp_path), gguf_file=path.name)
    assert ours.model_type == theirs.model_type == "qwen2"
    for field in CONFIG_FIELDS:
        assert getattr(ours, field) == getattr(theirs, field), field


@pytest.mark.parametrize(
    ("arch", "meta", "built"),
    [
        ("qwen2", {}, True),
        ("qwen2", {"qwen2.rope.scaling.type": "yarn"}, False),  # transformers' reader
        ("gemma3", {"gemma3.rope.scaling.type": "linear"}, True),
        ("llama", {}, False),
    ],
)
def test_which_configs_are_built_here(arch, meta, built):
    from stencil.engine.models.gguf_arch import builds_config

    assert builds_config(arch, meta) is built
