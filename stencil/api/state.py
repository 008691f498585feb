"""Server configuration and the per-app state (no module-level globals)."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Any

from stencil.api.metrics import ServerMetrics
from stencil.api.middleware.admission import Admission
from stencil.api.model_info import ModelInfo
from stencil.engine.errors import ConfigError
from stencil.engine.serving_engine import ServingEngine


def _opt(default: Any, help: str) -> Any:
    return field(default=default, metadata={"help": help})


@dataclass(slots=True)
class ServerConfig:
    """How the HTTP server runs (the engine has its own ``EngineConfig``). Every field is a
    ``stencil serve`` flag (``--max-header-bytes`` ...), the help text is the field's metadata."""

    host: str = _opt("127.0.0.1", "address to bind (loopback by default)")
    port: int = _opt(8000, "port to bind")
    api_key: str | None = _opt(
        None, "require 'Authorization: Bearer KEY' on every route but /health"
    )
    served_model_name: str | None = _opt(None, "the model name clients use (default: the model's)")
    max_body_bytes: int = _opt(16 << 20, "largest request body; beyond: 413")
    max_header_bytes: int = _opt(
        16 << 10, "largest total size of request header names and values; beyond: 431"
    )
    max_headers: int = _opt(100, "most request header fields; beyond: 431")
    shutdown_timeout: float = _opt(
        30.0,
        "seconds SIGTERM waits for in-flight requests (new ones get 503); those still running "
        "then end with an error",
    )
    log_level: str = _opt("info", "uvicorn's log level")
    max_embedding_inputs: int = _opt(2048, "inputs in one /v1/embeddings request")
    max_embedding_tokens: int = _opt(
        300_000, "tokens over all inputs of one /v1/embeddings request"
    )
    max_stored_responses: int = _opt(
        1024, "responses kept in memory for previous_response_id (least recently used evicted)"
    )
    max_stored_response_bytes: int = _opt(
        64 << 20, "bytes of JSON the stored responses may hold in all (LRU eviction beyond)"
    )
    playground: bool = _opt(
        True,
        "serve the playground page at / (--no-playground: not mounted, nothing of it imported)",
    )

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port must be in [0, 65535], got {self.port}")
        for name in ("max_body_bytes", "max_header_bytes", "max_headers"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.max_stored_responses < 0 or self.max_stored_response_bytes < 0:
            raise ConfigError("max_stored_responses and max_stored_response_bytes must be >= 0")
        if self.max_embedding_inputs <= 0 or self.max_embedding_tokens <= 0:
            raise ConfigError("max_embedding_inputs and max_embedding_tokens must be > 0")
        if not 0 <= self.shutdown_timeout < float("inf"):
            raise ConfigError(f"shutdown_timeout must be >= 0 seconds, got {self.shutdown_timeout}")
        if self.api_key is not None and not self.api_key:
            raise ConfigError("api_key must not be empty")


@dataclass(slots=True)
class AppState:
    config: ServerConfig
    metrics: ServerMetrics = field(default_factory=ServerMetrics)
    admission: Admission = field(default_factory=Admission)
    engine: ServingEngine | None = None
    runner: Any = None
    model: ModelInfo | None = None
    model_name: str = ""
    fingerprint: str = ""
    load_error: str | None = None
    owns_engine: bool = False
    created: int = field(default_factory=lambda: int(time.time()))
    # the Responses API's stored responses (``responses_api.store.ResponseStore``), handed in by
    # ``create_app``: this module sits below the APIs and imports none of them
    responses: Any = None

    def runner_fail_all(self, error: Any) -> int:
        """End every open generation with ``error`` (shutdown); how many there were."""
        return self.runner.fail_all(error) if self.runner is not None else 0

    def attach(self, engine: ServingEngine) -> None:
        from stencil.api.engine_client import EngineClient

        self.engine = engine
        self.runner = EngineClient(engine, self.metrics)
        self.model = ModelInfo(
            engine.tokenizer,
            int(engine.max_model_len),
            int(engine.vocab_size),
            reasoning_end=engine.reasoning_end,
        )
        self.model_name = self.config.served_model_name or str(engine.model_name)
        digest = hashlib.sha1(f"{engine.model_name}:{version()}".encode()).hexdigest()
        self.fingerprint = f"fp_stencil_{digest[:10]}"


def version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("stencil-serve")
    except PackageNotFoundError:
        return "0.0.0"
