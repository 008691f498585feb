"""Object policies: the closed-by-default rule, ``propertyNames``, ``min/maxProperties``."""

from __future__ import annotations

from typing import Any

import jsonschema

from ..errors import UnsupportedSchemaError


def close_object(schema: dict, out: dict, *, closed: bool, in_all_of: bool) -> None:
    """OpenAI-strict default: an object with declared properties admits no other keys.

    Not applied inside ``allOf`` members (or next to ``allOf`` / ``$ref``), where closing one
    part would forbid the keys another part declares; those objects keep JSON Schema
    semantics. Keys that are required (also by dependencies) but not declared are declared
    with any value."""
    if not closed or in_all_of or "properties" not in out:
        return
    if any(
        k in schema
        for k in (
            "additionalProperties",
            "patternProperties",
            "allOf",
            "$ref",
            "unevaluatedProperties",
        )
    ):
        return
    out["additionalProperties"] = False
    for name in [*out.get("required", ()), *_dependent_names(schema)]:
        out["properties"].setdefault(name, True)


ANY_KEY = "^[\\s\\S]*$"
"""A pattern every key matches (llguidance regex syntax)."""


def canonical_keys(schema: dict, out: dict) -> None:
    """Keys are matched against names on their text: a key spelled with an escape
    (``"\\u006eame"``) would pass as an undeclared key, its name's schema (or dependency)
    unapplied. Where undeclared keys take any value, they are admitted as a pattern every key
    matches instead, whose keys llguidance writes only as JSON requires (no escape of a
    printable character): the same values, one spelling. Left: beside other
    ``patternProperties`` (llguidance wants pattern keys disjoint), and where undeclared keys
    take a schema (a pattern of every key but the names, the complement of their trie, is
    exact but costs ~1.1 ms a mask at each key's start, against ~0.1 ms)."""
    if out.get("additionalProperties", True) is not True or "patternProperties" in out:
        return
    if not any(k in schema for k in _NAMED) and "object" not in _types(schema):
        return
    out["patternProperties"] = {ANY_KEY: True}
    out["additionalProperties"] = False


_NAMED = (
    "properties",
    "required",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "unevaluatedProperties",
    "additionalProperties",
)


def _types(schema: dict) -> list:
    kind = schema.get("type")
    return kind if isinstance(kind, list) else [kind]


def _dependent_names(schema: dict) -> list[str]:
    """Keys that ``dependentRequired`` / array ``dependencies`` may require."""
    names: list[str] = []
    for key in ("dependentRequired", "dependencies"):
        for deps in (schema.get(key) or {}).values():
            if isinstance(deps, list):
                names.extend(d for d in deps if isinstance(d, str))
    return names


def property_names(schema: dict, out: dict, names: Any, here: str) -> None:
    """``propertyNames`` as an explicit key set or key pattern, where that is exact."""
    if names is True or names == {}:
        return
    values = out.pop("additionalProperties", True)
    props = out.setdefault("properties", {})
    if isinstance(names, dict) and "patternProperties" not in out and _names_only(names):
        if "enum" in names or "const" in names:
            allowed = [n for n in names.get("enum", [names.get("const")]) if isinstance(n, str)]
            for name in props:
                props[name] = props[name] if name in allowed else False
            extra = [n for n in allowed if n not in props]
            if extra and values is not False:  # any order, like any other map key
                out["patternProperties"] = {_alternation(extra): values}
            out["additionalProperties"] = False
            return
        if "pattern" in names and values is not False:
            out["patternProperties"] = {names["pattern"]: values}
            out["additionalProperties"] = False
            return
    out["additionalProperties"] = values
    if values is not False or "patternProperties" in out:
        raise UnsupportedSchemaError("propertyNames", here)
    if not _names_valid(list(props), schema["propertyNames"]):
        raise UnsupportedSchemaError("propertyNames", here)


def property_counts(out: dict) -> None:
    """Drop ``min/maxProperties`` that ``required`` / a closed key set already imply, and
    spell ``minProperties: 1`` of a closed object as "one of its keys is present"."""
    props = out.get("properties", {})
    closed = out.get("additionalProperties", True) is False and "patternProperties" not in out
    low, high = out.get("minProperties"), out.get("maxProperties")
    if low is not None and len(set(out.get("required", ()))) >= low:
        del out["minProperties"]
    elif low == 1 and closed and props:
        del out["minProperties"]
        one = {"anyOf": [{"required": [k]} for k, v in props.items() if v is not False]}
        out.setdefault("allOf", []).append(one)
    if high is not None and closed and high >= len(props):
        del out["maxProperties"]


def counts_left_to_check(out: dict) -> list[str]:
    """``min/maxProperties`` llguidance cannot enforce (some declared key is optional):
    removed from ``out``, returned to be checked as the object completes."""
    props = out.get("properties", {})
    if not props or set(props) <= set(out.get("required", ())):
        return []
    return [k for k in ("minProperties", "maxProperties") if out.pop(k, None) is not None]


def _names_only(names: dict) -> bool:
    return (
        set(names) <= {"type", "pattern", "enum", "const"}
        and names.get("type", "string") == "string"
    )


_META = frozenset("\\.+*?()|[]{}^$-&~#/")


def _alternation(names: list[str]) -> str:
    """An anchored regex matching exactly ``names`` (regex metacharacters escaped)."""
    escaped = ["".join(f"\\{c}" if c in _META else c for c in n) for n in names]
    return "^(?:" + "|".join(escaped) + ")$"


def _names_valid(names: list[str], names_schema: Any) -> bool:
    try:
        validator = jsonschema.Draft202012Validator(names_schema)
        return all(validator.is_valid(n) for n in names)
    except jsonschema.exceptions.JsonSchemaException:
        return False
