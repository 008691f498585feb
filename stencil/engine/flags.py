"""Command-line flags generated from a config dataclass, one ``--flag`` per field: the engine's
(``EngineConfig``), shared by every command that loads a model (``stencil serve``, ``generate``,
``extract``), and the server's (``ServerConfig``, by ``stencil serve``)."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from stencil.engine.config import EngineConfig

SCALARS = {"int": int, "float": float, "str": str}


def add_dataclass_flags(
    parser: argparse.ArgumentParser, cls: type, title: str, skip: frozenset[str] = frozenset()
) -> None:
    """One ``--flag`` per field of the dataclass ``cls`` but ``skip``, in the group ``title``:
    default None (the dataclass default applies), ``--x / --no-x`` for a bool, the help text
    from the field's ``metadata["help"]``."""
    group = parser.add_argument_group(title)
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        flag = "--" + f.name.replace("_", "-")
        type_name = str(f.type).replace(" | None", "").strip()
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        text = f.metadata.get("help") or f"{cls.__name__}.{f.name}"
        help_ = f"{text} (default: {default!r})"
        if type_name == "bool":
            kind: dict[str, Any] = {"action": argparse.BooleanOptionalAction}
        else:
            kind = {"type": SCALARS.get(type_name, str)}
        group.add_argument(flag, dest=f.name, default=None, help=help_, **kind)


def given_fields(
    args: argparse.Namespace, cls: type, skip: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """The fields of the dataclass ``cls`` given on the command line."""
    return {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(cls)
        if f.name not in skip and getattr(args, f.name, None) is not None
    }


def add_engine_flags(parser: argparse.ArgumentParser) -> None:
    """One ``--flag`` per EngineConfig field."""
    add_dataclass_flags(parser, EngineConfig, "engine")


def engine_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The EngineConfig fields given on the command line."""
    return given_fields(args, EngineConfig)


def engine_config(args: argparse.Namespace) -> EngineConfig:
    """The EngineConfig the flags describe (only the flags that were given)."""
    return EngineConfig(**engine_kwargs(args))
