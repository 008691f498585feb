"""Exact rewrites of ``oneOf``, ``not`` and dependencies into keywords llguidance enforces."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import jsonschema

from .branch_index import BranchFacts, candidate_groups, pair_count, pairs
from .keywords import JSON_TYPES

Schema = dict[str, Any] | bool
Lookup = Callable[[str], Schema | None]  # "$ref" value -> normalized target (None: unknown yet)

_MAX_PAIRWISE = 5_000_000
"""Pairwise disjointness proofs one ``oneOf`` may take (~3,160 branches none of which hashing
tells apart; ~30-45 s here). Past it the ``oneOf`` goes to llguidance, whose own check is
narrower but fast."""


def _value_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    if isinstance(value, float):
        return "number"
    return {str: "string", list: "array", dict: "object"}[type(value)]


def types_of(schema: Schema, lookup: Lookup, depth: int = 0) -> frozenset[str]:
    """An over-approximation of the JSON types ``schema`` admits."""
    every = frozenset(JSON_TYPES)
    if schema is False:
        return frozenset()
    if schema is True or depth > 16:
        return every
    out = every
    if "$ref" in schema:
        target = lookup(schema["$ref"])
        out = out & (every if target is None else types_of(target, lookup, depth + 1))
    if "type" in schema:
        declared = schema["type"]
        declared = {declared} if isinstance(declared, str) else set(declared)
        if "number" in declared:
            declared.add("integer")
        out = out & frozenset(declared)
    if "const" in schema:
        out = out & {_value_type(schema["const"])}
    if "enum" in schema:
        out = out & frozenset(_value_type(v) for v in schema["enum"])
    if "anyOf" in schema:
        out = out & frozenset().union(*(types_of(s, lookup, depth + 1) for s in schema["anyOf"]))
    for sub in schema.get("allOf", ()):
        out = out & types_of(sub, lookup, depth + 1)
    return out


def _values(schema: Schema) -> set[str] | None:
    """Canonical texts of the finite set of values ``schema`` admits, or None if unbounded."""
    if not isinstance(schema, dict):
        return None
    if "const" in schema:
        return {canonical_text(schema["const"])}
    if "enum" in schema:
        return {canonical_text(v) for v in schema["enum"]}
    return None


def canonical_text(value: Any) -> str:
    """Equal JSON values, equal texts: ``1.0`` is ``1`` (JSON Schema compares numbers by value)."""
    return json.dumps(_canonical(value), sort_keys=True)


def _canonical(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    return value


def _discriminators(
    schema: Schema, lookup: Lookup, present: frozenset[str] = frozenset()
) -> dict[str, set[str]]:
    """Required properties of an object branch whose value is a finite set; ``present``:
    keys every instance where the branch applies holds (required beside it)."""
    if not isinstance(schema, dict):
        return {}
    if "$ref" in schema and (target := lookup(schema["$ref"])) is not None:
        return _discriminators(target, lookup, present) | _own_discriminators(schema, present)
    return _own_discriminators(schema, present)


def _own_discriminators(schema: dict, present: frozenset[str]) -> dict[str, set[str]]:
    required = set(schema.get("required", ())) | present
    props = schema.get("properties", {})
    return {k: v for k in required if (v := _values(props.get(k))) is not None}


def _disjoint(
    a: Schema, b: Schema, lookup: Lookup, context: frozenset[str], present: frozenset[str]
) -> bool:
    ta, tb = types_of(a, lookup) & context, types_of(b, lookup) & context
    if not ta & tb:
        return True
    va, vb = _values(a), _values(b)
    if va is not None and vb is not None and not va & vb:
        return True
    if _values_outside(a, b) or _values_outside(b, a):
        return True
    if ta & tb <= {"string"} and _lengths_disjoint(a, b):
        return True
    if (ta & tb) - {"object"}:
        return False  # `required` only restricts objects
    a, b = deref(a, lookup), deref(b, lookup)
    da, db = _discriminators(a, lookup, present), _discriminators(b, lookup, present)
    if any(not da[k] & db[k] for k in da.keys() & db.keys()):
        return True
    return _excludes(a, b) or _excludes(b, a)


def deref(schema: Schema, lookup: Lookup) -> Schema:
    """A bare ``{"$ref": ...}`` replaced by its (already normalized) target."""
    if isinstance(schema, dict) and set(schema) == {"$ref"}:
        target = lookup(schema["$ref"])
        return schema if target is None else target
    return schema


def _excludes(closed: Schema, other: Schema) -> bool:
    """``closed`` admits no key that ``other`` requires (both objects-only)."""
    if not isinstance(closed, dict) or not isinstance(other, dict):
        return False
    if closed.get("additionalProperties", True) is not False or "patternProperties" in closed:
        return False
    declared = closed.get("properties", {})
    return any(declared.get(k, False) is False for k in other.get("required", ()))


def _values_outside(finite: Schema, other: Schema) -> bool:
    """Every value ``finite`` admits (a const / enum) is invalid against ``other``."""
    if not isinstance(finite, dict) or ("enum" not in finite and "const" not in finite):
        return False
    if not isinstance(other, dict) or "$ref" in json.dumps(other):
        return False
    values = finite.get("enum", [finite.get("const")])
    try:
        validator = jsonschema.Draft202012Validator(other)
        return not any(validator.is_valid(v) for v in values)
    except (jsonschema.exceptions.JsonSchemaException, re.error, TypeError, ValueError):
        return False


def _lengths_disjoint(a: Schema, b: Schema) -> bool:
    if not isinstance(a, dict) or not isinstance(b, dict):
        return False
    lo_a, hi_a = a.get("minLength", 0), a.get("maxLength", float("inf"))
    lo_b, hi_b = b.get("minLength", 0), b.get("maxLength", float("inf"))
    return hi_a < lo_b or hi_b < lo_a


def one_of_as_any_of(
    branches: list[Schema],
    lookup: Lookup,
    context: frozenset[str] = frozenset(JSON_TYPES),
    present: frozenset[str] = frozenset(),
) -> list[Schema] | None:
    """Branches of an equivalent ``anyOf``, or None when equivalence cannot be shown.

    ``context``: the types the enclosing schema admits (its ``type`` keyword); ``present``:
    the keys an object there must hold (``required`` beside the ``oneOf``), so that a
    property a branch constrains but does not require can still tell branches apart."""
    if _exclusive(branches, lookup, context, present):
        return branches
    if all(isinstance(b, dict) and set(b) <= {"required"} for b in branches):
        return _required_only(branches)  # type: ignore[arg-type]
    return None


def _exclusive(
    branches: list[Schema], lookup: Lookup, context: frozenset[str], present: frozenset[str]
) -> bool:
    """No two branches overlap: told apart by hashing (``branch_index``), the pairs left
    proven one by one; False past ``_MAX_PAIRWISE`` proofs (llguidance then decides)."""
    groups = candidate_groups([_facts(b, lookup, context, present) for b in branches])
    if pair_count(groups) > _MAX_PAIRWISE:
        return False
    return all(
        _disjoint(branches[i], branches[j], lookup, context, present) for i, j in pairs(groups)
    )


def _facts(
    branch: Schema, lookup: Lookup, context: frozenset[str], present: frozenset[str]
) -> BranchFacts:
    target = deref(branch, lookup)
    values = _values(target)
    return BranchFacts(
        types=types_of(branch, lookup) & context,
        values=None if values is None else frozenset(values),
        tags={k: frozenset(v) for k, v in _discriminators(target, lookup, present).items()},
    )


def _required_only(branches: list[dict]) -> list[Schema]:
    """oneOf of ``{"required": R_i}``: branch i and, for every j != i, not all of R_j."""
    sets = [list(dict.fromkeys(b.get("required", ()))) for b in branches]
    out: list[Schema] = []
    for i, mine in enumerate(sets):
        others = [r for j, r in enumerate(sets) if j != i]
        if any(set(r) <= set(mine) for r in others):
            continue  # branch i always matches another one too
        branch: dict[str, Any] = {"required": mine} if mine else {}
        negations = [not_required(r) for r in others]
        if negations:
            branch["allOf"] = negations
        out.append(branch)
    return out or [False]


def not_required(names: list[str]) -> Schema:
    """``not {"required": names}``: at least one of ``names`` is absent."""
    return {"anyOf": [{"properties": {n: False}} for n in names]}


def negate(schema: Schema) -> Schema | None:
    """An exact schema for ``not schema`` when one exists in enforced keywords, else None."""
    if schema is True or schema == {}:
        return False
    if schema is False:
        return True
    keys = set(schema)
    if keys == {"required"}:
        return not_required(schema["required"]) if schema["required"] else False
    if keys == {"type"}:
        declared = schema["type"]
        declared = {declared} if isinstance(declared, str) else set(declared)
        if "integer" in declared and "number" not in declared:
            return None
        if "number" in declared:
            declared.add("integer")
        rest = [t for t in JSON_TYPES if t not in declared]
        return {"type": rest} if rest else False
    return None


def dependency(name: str, dep: list[str] | Schema) -> Schema:
    """``name`` absent, or present together with ``dep`` (required names or a schema)."""
    absent = {"properties": {name: False}}
    if isinstance(dep, list):
        return {"anyOf": [absent, {"required": dep}]} if dep else True
    return {"anyOf": [absent, {"required": [name], "allOf": [dep]}]}
