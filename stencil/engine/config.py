"""Engine configuration: one slots dataclass, validated, from which the CLI flags are generated."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from stencil.engine.errors import ConfigError
from stencil.engine.spec_decode.config import SpeculativeConfig

_DTYPES = ("auto", "float32", "bfloat16", "float16")
_ATTENTION_BACKENDS = ("auto", "torch")
_QUANTIZATIONS = (None, "none", "int8", "int4")


@dataclass(slots=True)
class EngineConfig:
    """Everything that shapes one engine instance.

    ``model`` None means the embedded SmolLM2-135M-Instruct default: its Q4_1 GGUF file, kept
    quantized unless ``quantization="none"`` (fp32; docs/engine.md has the trade).
    ``num_kv_blocks`` None means: size the KV cache from ``kv_cache_memory`` bytes.
    ``attention_backend`` "auto": Triton kernels on CUDA, the C kernel on CPU (pure torch where no
    compiler is found); "torch": the pure-torch reference kernels everywhere.
    ``decode_prefill_budget``: the most prompt tokens a step carries while sequences decode (None:
    up to ``max_num_batched_tokens``); lower trades time to first token for inter-token latency.
    ``quantization`` None: a GGUF file's weights as stored (Q8_0, Q4_K, ... kept quantized on
    CPU), safetensors as they are; "none": dequantized to ``dtype``; "int8" / "int4": weight-only
    quantization at load.
    ``cpu_threads_bind`` "auto": on CPU, the step loop's OpenMP threads are pinned one per CPU when
    ``num_threads`` covers every CPU the process may use (vLLM binds its threads likewise; the
    calling thread stays pinned, and processes it starts later inherit that); "none" (default):
    left to the OS scheduler. Pinning measured level on an idle 2-core machine, 1.3-1.4x under load.
    ``speculative_config`` (vLLM's): a dict or JSON object, e.g. ``{"method": "ngram",
    "num_speculative_tokens": 5, "prompt_lookup_max": 4}`` or ``{"method": "draft_model",
    "model": PATH, "num_speculative_tokens": 4}`` (``SpeculativeConfig``); None: off.
    """

    model: str | None = None
    dtype: str = "auto"
    device: str = "auto"
    max_model_len: int | None = None
    block_size: int = 16
    num_kv_blocks: int | None = None
    kv_cache_memory: int = 1 << 30
    max_num_seqs: int = 64
    max_num_batched_tokens: int = 1024
    decode_prefill_budget: int | None = None
    max_waiting_requests: int = 1024
    enable_prefix_caching: bool = True
    seed: int = 0
    num_threads: int | None = None
    constraint_compile_timeout: float = 10.0
    constraint_cache_bytes: int = 256 << 20
    constraint_compile_workers: int = 2
    constraint_compile_memory: int = 1 << 30
    reasoning_end: str | None = None
    pooling: str = "last"
    attention_backend: str = "auto"
    quantization: str | None = None
    cpu_threads_bind: str = "none"
    speculative_config: dict | str | Any = field(
        default=None,
        metadata={
            "help": 'vLLM\'s speculative_config as JSON, e.g. \'{"method": "ngram", '
            '"num_speculative_tokens": 5, "prompt_lookup_max": 4}\' or \'{"method": '
            '"draft_model", "model": PATH, "num_speculative_tokens": 4}\'; off when not '
            "given"
        },
    )

    def __post_init__(self) -> None:
        if self.dtype not in _DTYPES:
            raise ConfigError(f"dtype must be one of {_DTYPES}, got {self.dtype!r}")
        for name in ("block_size", "max_num_seqs", "max_num_batched_tokens", "kv_cache_memory"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.decode_prefill_budget is not None and self.decode_prefill_budget <= 0:
            raise ConfigError(
                f"decode_prefill_budget must be > 0, got {self.decode_prefill_budget}"
            )
        if self.num_kv_blocks is not None and self.num_kv_blocks < 2:
            raise ConfigError(f"num_kv_blocks must be >= 2, got {self.num_kv_blocks}")
        if self.max_model_len is not None and self.max_model_len <= 0:
            raise ConfigError(f"max_model_len must be > 0, got {self.max_model_len}")
        if self.max_waiting_requests <= 0:
            raise ConfigError("max_waiting_requests must be > 0")
        if self.attention_backend not in _ATTENTION_BACKENDS:
            raise ConfigError(
                f"attention_backend must be one of {_ATTENTION_BACKENDS}, got {self.attention_backend!r}"
            )
        if self.quantization not in _QUANTIZATIONS:
            raise ConfigError(
                f"quantization must be one of {_QUANTIZATIONS}, got {self.quantization!r}"
            )
        if self.cpu_threads_bind not in ("auto", "none"):
            raise ConfigError(
                f"cpu_threads_bind must be 'auto' or 'none', got {self.cpu_threads_bind!r}"
            )
        self.speculative_config = SpeculativeConfig.parse(self.speculative_config)
        if self.pooling not in ("last", "mean"):
            raise ConfigError(f"pooling must be 'last' or 'mean', got {self.pooling!r}")
        if self.constraint_compile_timeout <= 0:
            raise ConfigError("constraint_compile_timeout must be > 0")
        if self.constraint_compile_workers < 0:
            raise ConfigError("constraint_compile_workers must be >= 0")
        if self.constraint_compile_memory <= 0:
            raise ConfigError("constraint_compile_memory must be > 0")

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]
