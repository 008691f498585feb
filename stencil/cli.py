"""The ``stencil`` console script: ``serve`` (OpenAI-compatible server), ``generate`` (one prompt
through the offline engine) and ``extract`` (schema-shaped JSON out of files).

Engine flags (``--max-model-len``, ``--num-kv-blocks``, ...) are generated from ``EngineConfig``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Callable
from typing import Any

from stencil.engine.errors import ConfigError
from stencil.engine.flags import (
    add_dataclass_flags,
    add_engine_flags,
    engine_config,
    engine_kwargs,
    given_fields,
)

_NOT_FLAGS = frozenset({"log_level"})  # ServerConfig's: the global --log-level sets it


def add_server_flags(parser: argparse.ArgumentParser) -> None:
    """One ``--flag`` per ServerConfig field but ``log_level`` (the global ``--log-level``)."""
    from stencil.api.state import ServerConfig

    add_dataclass_flags(parser, ServerConfig, "server", _NOT_FLAGS)


def add_replica_flags(parser: argparse.ArgumentParser) -> None:
    """Scale-out on Ray Serve (``pip install 'stencil-serve[ray]'``); see docs/scaling.md."""
    group = parser.add_argument_group("replicas (Ray Serve)")
    group.add_argument(
        "--replicas", type=int, default=None, help="engine replicas behind one endpoint"
    )
    group.add_argument(
        "--ray",
        metavar="ADDRESS",
        default=None,
        help="the Ray cluster to run on (default with --replicas: a local instance)",
    )
    group.add_argument(
        "--autoscaling",
        metavar="JSON|FILE",
        default=None,
        help='Ray Serve autoscaling_config, e.g. \'{"min_replicas": 1, "max_replicas": 4}\'',
    )


def server_config(args: argparse.Namespace) -> Any:
    """The ServerConfig the serve flags describe."""
    from stencil.api.state import ServerConfig

    return ServerConfig(**given_fields(args, ServerConfig, _NOT_FLAGS), log_level=args.log_level)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stencil", description="Stencil: guaranteed structured output from local LLMs."
    )
    parser.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"]
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_LazyParser)

    serve = sub.add_parser("serve", help="run the OpenAI-compatible HTTP server")
    add_server_flags(serve)
    add_replica_flags(serve)
    add_engine_flags(serve)

    gen = sub.add_parser("generate", help="generate from one prompt with the offline engine")
    gen.add_argument("prompt")
    which = gen.add_mutually_exclusive_group()
    which.add_argument(
        "--json-schema",
        metavar="FILE|NAME",
        help="constrain to this JSON Schema (a file, or a library name: stencil extract --list-schemas)",
    )
    which.add_argument("--regex", metavar="R", help="constrain to this regular expression")
    which.add_argument("--choice", metavar="A,B", help="constrain to one of these strings")
    which.add_argument("--grammar", metavar="FILE", help="constrain to this Lark grammar")
    gen.add_argument("--max-tokens", type=int, default=256)
    gen.add_argument("--temperature", type=float, default=0.0)
    gen.add_argument(
        "--raw", action="store_true", help="complete the prompt as is (no chat template)"
    )
    add_engine_flags(gen)

    extract = sub.add_parser("extract", help="schema-shaped JSON out of many files")
    extract.loader = _add_extract_arguments
    return parser


class _LazyParser(argparse.ArgumentParser):
    """A subcommand parser that adds its arguments on first use, so that ``stencil serve`` does
    not import ``stencil.extract.command`` (and its document readers)."""

    loader: Callable[[argparse.ArgumentParser], None] | None = None

    def _load(self) -> None:
        if self.loader is not None:
            loader, self.loader = self.loader, None
            loader(self)

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        self._load()
        return super().parse_known_args(args, namespace)

    def format_help(self) -> str:
        self._load()
        return super().format_help()


def _add_extract_arguments(parser: argparse.ArgumentParser) -> None:
    module = _extract_module()
    if module is not None:
        module.add_arguments(parser)
    else:
        parser.add_argument("rest", nargs=argparse.REMAINDER)


def _extract_module() -> Any:
    try:
        return importlib.import_module("stencil.extract.command")
    except ModuleNotFoundError as e:
        if e.name != "stencil.extract.command":
            raise
        return None


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        if args.command == "serve":
            return serve(args)
        if args.command == "generate":
            return generate(args)
        return extract(args)
    except ConfigError as e:
        print(f"stencil: {e}", file=sys.stderr)
        return 2


def serve(args: argparse.Namespace) -> int:
    """Run uvicorn at once (``/health`` says 503 while the model loads); exit 1 if loading fails.
    SIGTERM drains (``--shutdown-timeout``) and exits 0."""
    config = engine_config(args)
    settings = server_config(args)
    if args.replicas is not None or args.ray or args.autoscaling:
        from stencil.api.ray.serve import serve_replicas

        return serve_replicas(config, settings, args.replicas, args.ray, args.autoscaling)

    from stencil.api.app import create_app
    from stencil.api.uvicorn_server import StencilServer

    failed: list[BaseException] = []

    def load() -> Any:
        from stencil.api.middleware.memory import freeze_heap
        from stencil.engine.async_engine import AsyncLLMEngine

        try:
            engine = AsyncLLMEngine.from_config(config)
            engine.engine.guided.start_workers()
            freeze_heap()
            return engine
        except BaseException as e:
            failed.append(e)
            server.should_exit = True
            raise

    app = create_app(load, settings, extra_routes(settings))
    server = StencilServer(app, settings)
    server.run()
    if failed:
        print(f"stencil serve: the model failed to load: {failed[0]}", file=sys.stderr)
        return 1
    return 0


def extra_routes(settings: Any) -> list[Any]:
    """The routers ``stencil serve`` mounts beside the API: the playground unless
    ``--no-playground`` (then nothing of it is imported)."""
    if not settings.playground:
        return []
    from stencil.playground import playground_routes

    return [playground_routes]


def generate(args: argparse.Namespace) -> int:
    from stencil.constraints import ConstraintError, translate
    from stencil.engine.sampling_params import SamplingParams
    from stencil.extract.schema_library import SchemaError

    try:
        constraint = _constraint(args)
        if constraint is not None:  # a bad constraint is a usage error, before the model loads
            translate(constraint)
    except (ConstraintError, SchemaError, OSError) as e:
        print(f"stencil generate: {e}", file=sys.stderr)
        return 2
    from stencil.engine.llm import LLM

    llm = LLM(**engine_kwargs(args))
    params = SamplingParams(
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        constraint=constraint,
        close_on_length=constraint is not None,
    )
    if args.raw:
        outputs = llm.generate([args.prompt], params, use_tqdm=False)
    else:
        outputs = llm.chat([{"role": "user", "content": args.prompt}], params, use_tqdm=False)
    print(outputs[0].outputs[0].text)
    return 0


def _constraint(args: argparse.Namespace) -> Any:
    from stencil.constraints import Constraint

    if args.json_schema:
        from stencil.extract.schema_library import resolve_schema

        return Constraint.json_schema(resolve_schema(args.json_schema)[1])
    if args.regex:
        return Constraint.regex(args.regex)
    if args.choice:
        return Constraint.choice([c for c in args.choice.split(",") if c])
    if args.grammar:
        with open(args.grammar, encoding="utf-8") as fh:
            return Constraint.grammar(fh.read())
    return None


def extract(args: argparse.Namespace) -> int:
    module = _extract_module()
    if module is None:
        print(
            "stencil extract: not available in this build (stencil.extract.command is missing)",
            file=sys.stderr,
        )
        return 2
    return int(module.run(args))


if __name__ == "__main__":
    sys.exit(main())
