"""Architecture name (``config.json``'s ``architectures``) -> Stencil's model class, and HF model
type -> architecture (for configs without one, and for GGUF files)."""

from __future__ import annotations

from stencil.engine.errors import ConfigError
from stencil.engine.models.decoder import DecoderForCausalLM
from stencil.engine.models.gemma import GemmaForCausalLM
from stencil.engine.models.llama import LlamaForCausalLM
from stencil.engine.models.olmo2 import Olmo2ForCausalLM

# architecture -> (HF model type, model class)
ARCHITECTURES: dict[str, tuple[str, type[DecoderForCausalLM]]] = {
    "LlamaForCausalLM": ("llama", LlamaForCausalLM),
    "Qwen2ForCausalLM": ("qwen2", LlamaForCausalLM),
    "Qwen3ForCausalLM": ("qwen3", LlamaForCausalLM),
    "MistralForCausalLM": ("mistral", LlamaForCausalLM),
    "Phi3ForCausalLM": ("phi3", LlamaForCausalLM),
    "GraniteForCausalLM": ("granite", LlamaForCausalLM),
    "SmolLM3ForCausalLM": ("smollm3", LlamaForCausalLM),
    "Gemma2ForCausalLM": ("gemma2", GemmaForCausalLM),
    "Gemma3ForCausalLM": ("gemma3_text", GemmaForCausalLM),
    "Olmo2ForCausalLM": ("olmo2", Olmo2ForCausalLM),
    "Qwen2MoeForCausalLM": ("qwen2_moe", LlamaForCausalLM),
    "Qwen3MoeForCausalLM": ("qwen3_moe", LlamaForCausalLM),
    "MixtralForCausalLM": ("mixtral", LlamaForCausalLM),
    "GptOssForCausalLM": ("gpt_oss", LlamaForCausalLM),
}
SUPPORTED_ARCHITECTURES = tuple(ARCHITECTURES)
MODEL_TYPES = {model_type: arch for arch, (model_type, _) in ARCHITECTURES.items()}


def model_class(config) -> type[DecoderForCausalLM]:
    """The class that runs ``config`` (by its model type: an architecture list may name several)."""
    arch = MODEL_TYPES.get(config.model_type)
    if arch is None:
        raise ConfigError(
            f"unsupported model type {config.model_type!r}; supported: {', '.join(MODEL_TYPES)}"
        )
    return ARCHITECTURES[arch][1]


def build(config, max_positions: int) -> DecoderForCausalLM:
    """The model for ``config`` (on the current default device: the loader uses meta)."""
    return model_class(config)(config, max_positions)
