"""Reject schemas that admit no finite instance through recursion (a least fixpoint).

``{"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]}`` has no finite
instance; a model held to it would nest until ``max_tokens``. ``productive`` over-approximates
satisfiability (it ignores most value constraints), so a ``False`` answer is always right.
"""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any] | bool
_SCALARS = frozenset({"null", "boolean", "integer", "number", "string"})


def has_finite_instance(root: Schema, defs: dict[str, Schema]) -> bool:
    known = {name: False for name in defs}
    changed = True
    while changed:
        changed = False
        for name, schema in defs.items():
            if not known[name] and _productive(schema, known):
                known[name] = changed = True
    return _productive(root, known)


def _productive(schema: Schema, known: dict[str, bool]) -> bool:
    if isinstance(schema, bool):
        return schema
    ref = schema.get("$ref")
    if isinstance(ref, str) and not known.get(ref.rsplit("/", 1)[-1], True):
        return False
    if not all(_productive(s, known) for s in schema.get("allOf", ())):
        return False
    for key in ("anyOf", "oneOf"):
        if key in schema and not any(_productive(s, known) for s in schema[key]):
            return False
    if "enum" in schema or "const" in schema:
        return True
    declared = schema.get("type", list(_SCALARS | {"array", "object"}))
    types = {declared} if isinstance(declared, str) else set(declared)
    if types & _SCALARS:
        return True
    if "array" in types and _array(schema, known):
        return True
    return "object" in types and _object(schema, known)


def _array(schema: dict, known: dict[str, bool]) -> bool:
    need = schema.get("minItems", 0)
    prefix = schema.get("prefixItems", [])
    if not all(_productive(s, known) for s in prefix[:need]):
        return False
    return need <= len(prefix) or _productive(schema.get("items", True), known)


def _object(schema: dict, known: dict[str, bool]) -> bool:
    props = schema.get("properties", {})
    extra = True if schema.get("patternProperties") else schema.get("additionalProperties", True)
    return all(_productive(props.get(name, extra), known) for name in schema.get("required", ()))
