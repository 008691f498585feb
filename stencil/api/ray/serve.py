"""``stencil serve --replicas N [--ray ADDRESS] [--autoscaling JSON]``: N engine replicas behind one
OpenAI endpoint, on Ray Serve.

Two deployments: ``EngineReplica`` (one engine and its own ``create_app(engine)`` app each, one CPU
per engine thread; requests reach it through ``PrefixAffinityRouter``) and ``Ingress`` (the HTTP
front, ``stencil.api.ray.ingress``; no CPU of its own). Serve restarts a replica that dies or
fails its health check. Needs the ``ray`` extra: ``pip install 'stencil-serve[ray]'``.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from stencil.api.ray.asgi_call import ForwardedRequest, call_asgi, call_asgi_whole
from stencil.api.state import ServerConfig
from stencil.engine.config import EngineConfig
from stencil.engine.errors import ConfigError

logger = logging.getLogger(__name__)

APP_NAME = "stencil"
ROUTER = "stencil.api.ray.routing.PrefixAffinityRouter"


class EngineReplica:
    """One engine and its app; ``handle`` streams an answer, ``call`` returns it whole."""

    def __init__(self, engine_config: EngineConfig, server_config: ServerConfig) -> None:
        from ray import serve

        from stencil.api.app import create_app
        from stencil.engine.async_engine import AsyncLLMEngine

        self.engine = AsyncLLMEngine.from_config(engine_config)
        self.engine.engine.guided.start_workers()
        self.app = create_app(self.engine, server_config)
        self.replica = serve.get_replica_context().replica_id.unique_id

    async def handle(self, request: ForwardedRequest) -> AsyncIterator[dict[str, Any]]:
        async for message in call_asgi(self.app, request):
            if "status" in message:
                message["replica"] = self.replica
            yield message

    async def call(self, request: ForwardedRequest) -> dict[str, Any]:
        answer = await call_asgi_whole(self.app, request)
        return {**answer, "replica": self.replica, "pid": os.getpid()}

    def check_health(self) -> None:
        """Serve's periodic health check: a dead or stalled engine loop restarts the replica."""
        if not self.engine.is_healthy():
            raise RuntimeError("the engine loop is dead or stalled")

    def __del__(self) -> None:
        engine = getattr(self, "engine", None)
        if engine is not None:
            engine.shutdown()


class Ingress:
    """The HTTP front (``serve.ingress``): builds ``ingress_app`` on its replica."""

    def __init__(self, engines: Any, server_config: ServerConfig) -> None:
        self.engines = engines
        self.server_config = server_config

    def __serve_build_asgi_app__(self) -> Any:
        from stencil.api.ray.ingress import ingress_app

        return ingress_app(self.engines, self.server_config)


def build_application(
    engine_config: EngineConfig,
    server_config: ServerConfig,
    replicas: int | None = None,
    autoscaling: dict[str, Any] | None = None,
) -> Any:
    """The Serve application: ``replicas`` engines, or as many as ``autoscaling`` says."""
    from ray import serve
    from ray.serve.config import RequestRouterConfig

    threads = engine_config.num_threads or 1
    scale: dict[str, Any] = (
        {"autoscaling_config": autoscaling} if autoscaling else {"num_replicas": replicas or 1}
    )
    engines = serve.deployment(
        EngineReplica,
        name="EngineReplica",
        ray_actor_options={"num_cpus": threads},
        max_ongoing_requests=engine_config.max_num_seqs,
        request_router_config=RequestRouterConfig(request_router_class=ROUTER),
        health_check_period_s=5,
        health_check_timeout_s=30,
        graceful_shutdown_timeout_s=server_config.shutdown_timeout,
        **scale,
    )
    front = serve.deployment(
        serve.ingress()(Ingress),
        name="Ingress",
        num_replicas=1,
        ray_actor_options={"num_cpus": 0},
        max_ongoing_requests=4096,
    )
    return front.bind(engines.bind(engine_config, server_config), server_config)


def load_autoscaling(value: str | None) -> dict[str, Any] | None:
    """``--autoscaling``: inline JSON or a JSON file, checked against Serve's AutoscalingConfig."""
    if not value:
        return None
    text = value if value.lstrip().startswith("{") else _read(value)
    try:
        config = json.loads(text)
    except ValueError as e:
        raise ConfigError(f"--autoscaling is not valid JSON: {e}") from e
    from ray.serve.config import AutoscalingConfig

    try:
        AutoscalingConfig(**config)
    except Exception as e:  # pydantic's ValidationError, TypeError for a non-object
        raise ConfigError(f"--autoscaling: {e}") from e
    return config


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"--autoscaling: cannot read {path}: {e}") from e


def serve_replicas(
    engine_config: EngineConfig,
    server_config: ServerConfig,
    replicas: int | None,
    address: str | None,
    autoscaling: str | None,
) -> int:
    """Run the application until SIGTERM/SIGINT. ``address`` None starts a private local Ray
    instance on 127.0.0.1 (stopped at exit); with an address only this application is removed."""
    if replicas is not None and replicas < 1:
        raise ConfigError(f"--replicas must be >= 1, got {replicas}")
    if replicas is not None and autoscaling:
        raise ConfigError("--replicas and --autoscaling cannot be combined")
    try:
        import ray
        from ray import serve
    except ImportError as e:
        raise ConfigError("--replicas needs Ray: pip install 'stencil-serve[ray]'") from e
    scaling = load_autoscaling(autoscaling)
    if address:
        ray.init(address=address, log_to_driver=False)
    else:
        ray.init(include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        serve.start(http_options={"host": server_config.host, "port": server_config.port})
        app = build_application(engine_config, server_config, replicas, scaling)
        serve.run(app, name=APP_NAME, route_prefix="/", blocking=False)
        logger.info("serving on http://%s:%d", server_config.host, server_config.port)
        stop.wait()
    finally:
        if address:
            serve.delete(APP_NAME)
        else:
            serve.shutdown()
        ray.shutdown()
    return 0
