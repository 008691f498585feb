"""The ready-made extraction schemas (``stencil/extract/schemas/*.json``, package data) and ``--schema``
resolution.

``--schema`` takes a JSON Schema file or the name of a library schema (``invoice``). The library
is searched in ``$STENCIL_SCHEMAS_DIR`` (``os.pathsep``-separated), then ``./schemas``, then the
schemas shipped inside the installed package.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class SchemaError(ValueError):
    """``--schema`` names no usable schema (a usage error: exit code 2)."""


@dataclass(frozen=True, slots=True)
class LibrarySchema:
    name: str
    path: Path
    description: str
    required: tuple[str, ...]


def library_dirs() -> list[Path]:
    """The folders searched for named schemas, in order (existing ones only)."""
    env = [Path(p) for p in os.environ.get("STENCIL_SCHEMAS_DIR", "").split(os.pathsep) if p]
    candidates = [
        *env,
        Path.cwd() / "schemas",
        Path(__file__).resolve().parent / "schemas",
    ]
    out: list[Path] = []
    for d in candidates:
        if d.is_dir() and d.resolve() not in {o.resolve() for o in out}:
            out.append(d)
    return out


def list_schemas() -> list[LibrarySchema]:
    """Every library schema (the first folder wins for a name), sorted by name."""
    found: dict[str, LibrarySchema] = {}
    for d in library_dirs():
        for path in sorted(d.glob("*.json")):
            if path.stem in found:
                continue
            try:
                schema = _load(path)
            except SchemaError:
                continue
            found[path.stem] = LibrarySchema(
                path.stem,
                path,
                str(schema.get("description", "")),
                tuple(schema.get("required", ())),
            )
    return [found[k] for k in sorted(found)]


def resolve_schema(spec: str) -> tuple[str, dict[str, Any]]:
    """(name, schema) for a file path or a library name; SchemaError when neither fits."""
    path = Path(spec)
    if path.is_file():
        return path.stem, _load(path)
    name = spec.removesuffix(".json")
    if os.sep not in name and "/" not in name:
        for d in library_dirs():
            candidate = d / f"{name}.json"
            if candidate.is_file():
                return name, _load(candidate)
    names = ", ".join(s.name for s in list_schemas()) or "none found"
    raise SchemaError(f"no schema file or library schema named {spec!r} (library: {names})")


def _load(path: Path) -> dict[str, Any]:
    try:
        schema = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise SchemaError(f"cannot read schema {str(path)!r}: {e}") from e
    if not isinstance(schema, dict):
        raise SchemaError(f"schema {str(path)!r} is not a JSON object")
    from jsonschema import exceptions, validators

    try:
        validators.validator_for(schema).check_schema(schema)
    except exceptions.SchemaError as e:
        raise SchemaError(f"schema {str(path)!r} is not a valid JSON Schema: {e.message}") from e
    return schema
