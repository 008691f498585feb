"""``Presence``: what every instance a subschema applies to is known to satisfy because of the
schemas applying beside it to the same instance (its parent's ``required`` and ``type``, its
``allOf`` siblings'). A ``oneOf`` reads it to tell branches apart: branches that constrain a
property to different values without requiring it are disjoint where the property is required
beside them, and branches that differ only on non-objects are disjoint where only objects are
admitted. It only ever narrows what is proven, never what is generated."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidSchemaError, UnsupportedSchemaError
from .keywords import JSON_TYPES
from .logic import types_of

_TYPING = ("type", "enum", "const")


@dataclass(frozen=True, slots=True)
class Presence:
    required: frozenset[str] = frozenset()
    """Keys an object instance holds."""
    types: frozenset[str] = frozenset(JSON_TYPES)
    """JSON types the instance may have (an over-approximation)."""

    def __and__(self, other: Presence) -> Presence:
        return Presence(self.required | other.required, self.types & other.types)


def presence_of(schema: dict, resolve: Callable[[str], Any]) -> Presence:
    """What ``schema`` itself and its ``allOf`` members (through one ``$ref``, ``resolve``
    giving the raw target) say of the instance."""
    required: set[str] = set()
    types = frozenset(JSON_TYPES)
    for part in [schema, *(schema.get("allOf") or ())]:
        if isinstance(part, dict) and isinstance(part.get("$ref"), str) and part is not schema:
            try:
                target = resolve(part["$ref"])
            except (InvalidSchemaError, UnsupportedSchemaError):
                target = None  # the $ref's own error surfaces where it is translated
            if isinstance(target, dict):
                required.update(_names(target.get("required")))
                types &= _types(target)
        if isinstance(part, dict):
            required.update(_names(part.get("required")))
            types &= _types(part)
    return Presence(frozenset(required), types)


def _types(schema: dict) -> frozenset[str]:
    return types_of({k: schema[k] for k in _TYPING if k in schema}, lambda ref: None)


def _names(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
