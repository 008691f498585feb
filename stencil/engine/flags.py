"""Command-line flags generated from ``EngineConfig``: one ``--flag`` per field, shared by every
command that loads a model (``stencil serve``, ``generate``, ``extract``)."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from stencil.engine.config import EngineConfig

SCALARS = {"int": int, "float": float, "str": str}


def add_engine_flags(parser: argparse.ArgumentParser) -> None:
    """One ``--flag`` per EngineConfig field (default None: the dataclass default applies)."""
    group = parser.add_argument_group("engine")
    for f in dataclasses.fields(EngineConfig):
        flag = "--" + f.name.replace("_", "-")
        type_name = str(f.type).replace(" | None", "").strip()
        help_ = f"EngineConfig.{f.name} (default: {f.default!r})"
        if type_name == "bool":
            group.add_argument(
                flag, dest=f.name, action=argparse.BooleanOptionalAction, default=None, help=help_
            )
        else:
            group.add_argument(
                flag, dest=f.name, type=SCALARS.get(type_name, str), default=None, help=help_
            )


def engine_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The EngineConfig fields given on the command line."""
    return {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(EngineConfig)
        if getattr(args, f.name, None) is not None
    }


def engine_config(args: argparse.Namespace) -> EngineConfig:
    """The EngineConfig the flags describe (only the flags that were given)."""
    return EngineConfig(**engine_kwargs(args))
