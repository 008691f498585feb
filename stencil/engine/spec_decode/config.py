"""``SpeculativeConfig``: vLLM's ``speculative_config`` dict, validated (``ConfigError`` names the
field). ``method`` "ngram" drafts by prompt lookup; "draft_model" is not built yet and is refused."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import Any

from stencil.engine.errors import ConfigError

_METHODS = ("ngram",)


@dataclass(frozen=True, slots=True)
class SpeculativeConfig:
    """``num_speculative_tokens`` (k): drafts proposed per step (tokens the constraint forces come
    on top, free); ``prompt_lookup_max`` / ``prompt_lookup_min``: the longest / shortest suffix
    n-gram looked up in the prompt and output so far; ``disable_by_batch_size``: no drafts while
    more sequences than this run (verifying k + 1 rows per sequence then costs more than it
    saves; measured in docs/engine.md)."""

    method: str = "ngram"
    num_speculative_tokens: int = 5
    prompt_lookup_max: int = 4
    prompt_lookup_min: int = 2
    disable_by_batch_size: int = 8

    def __post_init__(self) -> None:
        if self.method == "draft_model":
            raise ConfigError(
                "speculative_config.method 'draft_model' is not available yet; use 'ngram'"
            )
        if self.method not in _METHODS:
            raise ConfigError(
                f"speculative_config.method must be one of {_METHODS}, got {self.method!r}"
            )
        for name in ("num_speculative_tokens", "prompt_lookup_max", "prompt_lookup_min"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(
                    f"speculative_config.{name} must be an integer >= 1, got {value!r}"
                )
        if self.prompt_lookup_min > self.prompt_lookup_max:
            raise ConfigError(
                "speculative_config.prompt_lookup_min must be <= prompt_lookup_max, got "
                f"{self.prompt_lookup_min} > {self.prompt_lookup_max}"
            )
        size = self.disable_by_batch_size
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigError(
                f"speculative_config.disable_by_batch_size must be an integer >= 1, got {size!r}"
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
        if value.get("method") == "draft_model":
            cls(method="draft_model")  # raises: not available yet
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ConfigError(
                f"speculative_config has unknown field(s) {unknown}; known: {sorted(known)}"
            )
        if "method" not in value:
            raise ConfigError("speculative_config.method is required ('ngram')")
        return cls(**value)
