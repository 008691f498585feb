"""Server configuration and the per-app state (no module-level globals)."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Any

from stencil.api.convert import ModelInfo
from stencil.api.metrics import ServerMetrics
from stencil.engine.errors import ConfigError


@dataclass(slots=True)
class ServerConfig:
    """How the HTTP server runs (the engine has its own ``EngineConfig``)."""

    host: str = "127.0.0.1"
    port: int = 8000
    api_key: str | None = None
    served_model_name: str | None = None
    max_body_bytes: int = 16 << 20
    log_level: str = "info"
    max_embedding_inputs: int = 2048  # inputs in one /v1/embeddings request
    max_embedding_tokens: int = 300_000  # tokens over all inputs of one /v1/embeddings request

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port must be in [0, 65535], got {self.port}")
        if self.max_body_bytes <= 0:
            raise ConfigError("max_body_bytes must be > 0")
        if self.max_embedding_inputs <= 0 or self.max_embedding_tokens <= 0:
            raise ConfigError("max_embedding_inputs and max_embedding_tokens must be > 0")
        if self.api_key is not None and not self.api_key:
            raise ConfigError("api_key must not be empty")


@dataclass(slots=True)
class AppState:
    config: ServerConfig
    metrics: ServerMetrics = field(default_factory=ServerMetrics)
    engine: Any = None
    runner: Any = None
    model: ModelInfo | None = None
    model_name: str = ""
    fingerprint: str = ""
    load_error: str | None = None
    owns_engine: bool = False
    created: int = field(default_factory=lambda: int(time.time()))

    def attach(self, engine: Any) -> None:
        from stencil.api.generation import EngineRunner

        self.engine = engine
        self.runner = EngineRunner(engine, self.metrics)
        self.model = ModelInfo(engine.tokenizer, int(engine.max_model_len), int(engine.vocab_size))
        self.model_name = self.config.served_model_name or str(engine.model_name)
        digest = hashlib.sha1(f"{engine.model_name}:{version()}".encode()).hexdigest()
        self.fingerprint = f"fp_stencil_{digest[:10]}"


def version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("stencil-serve")
    except PackageNotFoundError:
        return "0.0.0"
