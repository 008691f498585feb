"""Intersections llguidance cannot build inside a recursion, loosened for the ``loose_refs``
retry: the grammar follows one side and the node is checked as its value completes.

llguidance intersects two subschemas by merging them, and refuses ("circular references with
sibling keys") when one of them is a ``$ref`` into a cycle it is still expanding. Besides a
``$ref`` with sibling keywords (``Normalizer.node``), three shapes ask for such a merge:

- ``allOf`` (as written, or from ``dependencies``, ``not``, ``if``, ...) of members one of
  which holds a ``$ref``: the grammar takes one side alone, a ``$ref`` member first;
- ``anyOf`` (``oneOf`` is one here) with a ``$ref`` branch beside sibling keywords (``type``,
  what ``objects`` adds), which llguidance merges into every branch: the ``$ref`` branches go
  bare, the other branches keep the siblings (``allOf`` of both);
- a declared property that a ``patternProperties`` pattern also matches, either subschema
  holding a ``$ref``: the declared one becomes ``true`` (the pattern's subschema alone applies;
  exact when both are the same schema, as they often are).

Each is a superset of the node; the node's pointer is listed for a decode-time check with the
keyword named, so the value is validated by ``jsonschema`` when it completes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import regex

# the keywords the translator turns into ``allOf`` members (named by the check)
_ALL_OF_SOURCES = ("allOf", "dependencies", "dependentSchemas", "dependentRequired", "not", "if")
_NOT_MERGED = frozenset({"anyOf", "minProperties", "maxProperties"})
Check = Callable[[str], None]  # records a decode-time check of this node, naming a keyword


def loosened(out: dict[str, Any], schema: dict[str, Any], check: Check) -> dict[str, Any]:
    """``out`` (``schema`` translated) without the merges llguidance cannot do in a
    recursion."""
    if "allOf" in out and _has_ref(out):
        own = {k: v for k, v in out.items() if k != "allOf"}
        sides = [m for m in out["allOf"] if isinstance(m, dict) and "$ref" in m]
        sides += [own, *out["allOf"]]
        check(next((k for k in _ALL_OF_SOURCES if k in schema), "allOf"))
        side = next(s for s in sides if _has_ref(s))
        return {"$ref": side["$ref"]} if "$ref" in side else loosened(side, schema, check)
    branches = out.get("anyOf", ())
    if len(out) > 1 and any(isinstance(b, dict) and "$ref" in b for b in branches):
        check("anyOf" if "anyOf" in schema or "oneOf" not in schema else "oneOf")
        # property counts merged into a branch with properties are not llguidance's to
        # enforce; the check holds them
        siblings = {k: v for k, v in out.items() if k not in _NOT_MERGED}
        return {"anyOf": [_branch(b, siblings) for b in branches]}
    _pattern_properties(out, check)
    return out


def _branch(branch: Any, siblings: dict[str, Any]) -> Any:
    if isinstance(branch, dict) and "$ref" in branch:
        return {"$ref": branch["$ref"]}
    return {"allOf": [siblings, branch]} if siblings else branch


def _pattern_properties(out: dict[str, Any], check: Check) -> None:
    patterns = out.get("patternProperties") or {}
    properties = out.get("properties") or {}
    for name, sub in list(properties.items()):
        matched = [s for p, s in patterns.items() if s is not True and _may_match(p, name)]
        if not matched or not any(map(_has_ref, [sub, *matched])):
            continue
        if any(s != sub for s in matched):
            check("patternProperties")
        properties[name] = True


def _may_match(pattern: str, key: str) -> bool:
    """Whether ``pattern`` (llguidance's syntax) matches ``key``; yes where unreadable."""
    try:
        return regex.search(pattern, key, flags=regex.V1) is not None
    except regex.error:
        return True


def _has_ref(node: Any) -> bool:
    if isinstance(node, dict):
        return "$ref" in node or any(_has_ref(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_ref(v) for v in node)
    return False
