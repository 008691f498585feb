"""``SpeculativeConfig``: vLLM's ``speculative_config`` dict, validated (``ConfigError`` names the
field). ``method`` "ngram" drafts by prompt lookup; "draft_model" by a small model with the
target's tokenizer (``model``: a path the engine loads as a model)."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import Any

from stencil.engine.errors import ConfigError

_METHODS = ("ngram", "draft_model")
_QUANTIZATIONS = (None, "none", "int8", "int4")
_ONLY = {  # fields that apply to one method only
    "prompt_lookup_max": "ngram",
    "prompt_lookup_min": "ngram",
    "model": "draft_model",
    "quantization": "draft_model",
}


@dataclass(frozen=True, slots=True)
class SpeculativeConfig:
    """``num_speculative_tokens`` (k): drafts proposed per step (tokens the constraint forces come
    on top, free); ``prompt_lookup_max`` / ``prompt_lookup_min`` (ngram, default 4 / 2): the
    longest / shortest suffix n-gram looked up in the prompt and output so far; ``model``
    (draft_model): the draft model's path (a safetensors directory or a GGUF file) and
    ``quantization`` its weights' (as ``EngineConfig.quantization``); ``disable_by_batch_size``:
    no drafts while more sequences than this run (verifying k + 1 rows per sequence then costs
    more than it saves); None: the batch size where that happens for this model and machine,
    from its measured step cost and acceptance (``step_cost.py``)."""

    method: str = "ngram"
    num_speculative_tokens: int = 5
    prompt_lookup_max: int | None = None
    prompt_lookup_min: int | None = None
    disable_by_batch_size: int | None = None
    model: str | None = None
    quantization: str | None = None

    def __post_init__(self) -> None:
        if self.method not in _METHODS:
            raise ConfigError(
                f"speculative_config.method must be one of {_METHODS}, got {self.method!r}"
            )
        for name, method in _ONLY.items():
            if getattr(self, name) is not None and method != self.method:
                raise ConfigError(
                    f"speculative_config.{name} applies to method {method!r} only, "
                    f"not {self.method!r}"
                )
        if self.method == "ngram":
            self._ngram_defaults()
        else:
            self._check_draft_model()
        _positive_int("num_speculative_tokens", self.num_speculative_tokens)
        if self.disable_by_batch_size is not None:
            _positive_int("disable_by_batch_size", self.disable_by_batch_size)

    def _ngram_defaults(self) -> None:
        if self.prompt_lookup_max is None:
            object.__setattr__(self, "prompt_lookup_max", 4)
        _positive_int("prompt_lookup_max", self.prompt_lookup_max)
        if self.prompt_lookup_min is None:
            object.__setattr__(self, "prompt_lookup_min", min(2, self.prompt_lookup_max))
        _positive_int("prompt_lookup_min", self.prompt_lookup_min)
        if self.prompt_lookup_min > self.prompt_lookup_max:
            raise ConfigError(
                "speculative_config.prompt_lookup_min must be <= prompt_lookup_max, got "
                f"{self.prompt_lookup_min} > {self.prompt_lookup_max}"
            )

    def _check_draft_model(self) -> None:
        if not isinstance(self.model, str) or not self.model:
            raise ConfigError(
                "speculative_config.model (the draft model's path) is required for method "
                f"'draft_model', got {self.model!r}"
            )
        if self.quantization not in _QUANTIZATIONS:
            raise ConfigError(
                f"speculative_config.quantization must be one of {_QUANTIZATIONS}, "
                f"got {self.quantization!r}"
            )

    @classmethod
    def parse(cls, value: Any) -> SpeculativeConfig | None:
        """From a dict, a JSON object string (the CLI flag), an instance or None (off)."""
        if value is None or isinstance(value, cls):
            return value
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as e:
                raise ConfigError(f"speculative_config is not valid JSON: {e}") from e
        if not isinstance(value, dict):
            raise ConfigError(
                f"speculative_config must be a JSON object, got {type(value).__name__}"
            )
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ConfigError(
                f"speculative_config has unknown field(s) {unknown}; known: {sorted(known)}"
            )
        if "method" not in value:
            raise ConfigError(f"speculative_config.method is required (one of {_METHODS})")
        return cls(**value)


def _positive_int(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"speculative_config.{name} must be an integer >= 1, got {value!r}")
