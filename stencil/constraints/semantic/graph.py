"""Which schema nodes a completed value must be checked against, found once per schema.

The grammar enforces every keyword it can; the translator lists the nodes (JSON pointers into
the user's document) where it over-approximated one (``uniqueItems``, a ``oneOf`` not shown
exclusive, ``if``, ``not``, ``contains``, a format or pattern the lexer cannot read, ...).

A value is validated, when it completes, against each node that applies to its instance
location *unconditionally* (reached from the root through ``properties``, ``items``, ``$ref``,
``allOf``, ...) and that holds an over-approximated keyword either itself or anywhere below a
conditional applicator (``anyOf``, ``oneOf``, ``not``, ``if`` / ``then`` / ``else``,
``dependentSchemas``, ``contains``, ``propertyNames``, ``unevaluated*``): below those, which
subschema applies to which part of the value depends on the value, so the whole value is
checked where the applicator sits. Validation is jsonschema's, against the original node, so
it is exact.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..json_schema.refs import DEFAULT_BASE, RefIndex, escape

# keyword -> the edges are conditional (only some values meet the subschema)
CONDITIONAL = frozenset(
    {
        "anyOf",
        "oneOf",
        "not",
        "if",
        "then",
        "else",
        "dependentSchemas",
        "dependencies",
        "contains",
        "propertyNames",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)
_SINGLE = frozenset({"additionalProperties", "additionalItems", "not", "if", "then", "else"})
_SINGLE |= {"contains", "propertyNames", "unevaluatedItems", "unevaluatedProperties"}
_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_MAPS = frozenset({"properties", "patternProperties", "dependentSchemas"})


@dataclass(frozen=True, slots=True)
class Node:
    schema: Any
    pointer: str
    base: str
    """The base URI of the node's parent (``RefIndex`` convention)."""


def edges(index: RefIndex, node: Node, draft: int) -> Iterator[tuple[str, Node]]:
    """``(keyword, child)`` for every subschema of ``node`` and its ``$ref`` target."""
    schema = node.schema
    if not isinstance(schema, dict):
        return
    base = index.base_of(schema, node.base)
    if isinstance(schema.get("$ref"), str):
        target = index.resolve(schema["$ref"], base, node.pointer)
        yield "$ref", Node(target.node, target.pointer, target.base)
        if draft <= 7:
            return  # siblings of $ref are ignored before 2019-09
    for key, value in schema.items():
        here = f"{node.pointer}/{escape(key)}"
        if key in _SINGLE or (key == "items" and not isinstance(value, list)):
            yield key, Node(value, here, base)
        elif key in _LISTS or key == "items":
            if isinstance(value, list):
                yield from ((key, Node(v, f"{here}/{i}", base)) for i, v in enumerate(value))
        elif key in _MAPS or key == "dependencies":
            if isinstance(value, dict):
                for name, sub in value.items():
                    if not isinstance(sub, list):
                        yield key, Node(sub, f"{here}/{escape(name)}", base)


@dataclass(frozen=True, slots=True)
class Analysis:
    reaches: frozenset[str]
    """Nodes from which an over-approximated node can be reached."""
    checked: frozenset[str]
    """Nodes validated where they apply (see the module docstring)."""


def analyze(index: RefIndex, root: Any, draft: int, inexact: frozenset[str]) -> Analysis:
    """Walk every node reachable from the root once and mark ``reaches`` / ``checked``."""
    parents: dict[str, set[str]] = {}
    conditional: dict[str, list[str]] = {}
    seen = {""}
    stack = [Node(root, "", DEFAULT_BASE)]
    while stack:
        node = stack.pop()
        for key, child in edges(index, node, draft):
            parents.setdefault(child.pointer, set()).add(node.pointer)
            if key in CONDITIONAL:
                conditional.setdefault(node.pointer, []).append(child.pointer)
            if child.pointer not in seen:
                seen.add(child.pointer)
                stack.append(child)
    reaches = set(inexact)
    todo = list(inexact)
    while todo:
        for parent in parents.get(todo.pop(), ()):
            if parent not in reaches:
                reaches.add(parent)
                todo.append(parent)
    checked = set(inexact)
    for pointer, children in conditional.items():
        if any(c in reaches for c in children):
            checked.add(pointer)
    return Analysis(frozenset(reaches), frozenset(checked))
