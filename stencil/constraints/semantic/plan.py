"""``SemanticPlan``: the decode-time checks of one compiled JSON schema (shared by its
matchers; see ``graph`` for which nodes are checked and ``tracker`` for when)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import jsonschema
from jsonschema import validators

from ..json_schema.logic import canonical_text
from ..json_schema.refs import DEFAULT_BASE, RefIndex, escape
from .formats import format_checker
from .graph import Node, analyze

_VALIDATORS = {
    4: jsonschema.Draft4Validator,
    6: jsonschema.Draft6Validator,
    7: jsonschema.Draft7Validator,
    2019: jsonschema.Draft201909Validator,
    2020: jsonschema.Draft202012Validator,
}
_MEMO_ENTRIES = 4096  # child locations remembered per plan
_EXPAND_DEPTH = 64


@dataclass(frozen=True, slots=True, eq=False)
class Loc:
    """One instance location: the nodes that apply to it unconditionally."""

    nodes: tuple[Node, ...]
    checked: tuple[str, ...]
    """Pointers of the nodes a completed value here is validated against."""
    unique: bool
    """An over-approximated ``uniqueItems: true`` applies: items are compared as they complete."""
    max_prefix: int
    """Longest ``prefixItems`` / tuple ``items`` among the nodes (array indices past it share
    one child location)."""


class SemanticPlan:
    """Built once per compiled constraint; read by every matcher of it (one thread each)."""

    def __init__(self, root: Any, draft: int, checks: tuple[tuple[str, str], ...]) -> None:
        self.draft = draft
        self.keywords: dict[str, list[str]] = {}
        for pointer, keyword in checks:
            self.keywords.setdefault(pointer, []).append(keyword)
        inexact = frozenset(self.keywords)
        self.index = RefIndex(root, id_key="id" if draft <= 4 else "$id").build()
        self.analysis = analyze(self.index, root, draft, inexact)
        self.inexact = inexact
        cls = validators.validator_for(root, default=_VALIDATORS.get(draft, _VALIDATORS[2020]))
        self._root_validator = cls(root, format_checker=format_checker(cls))
        self._validators: dict[str, Any] = {}
        self._memo: dict[tuple[int, str | int], Loc | None] = {}
        self._root = self._loc([Node(root, "", DEFAULT_BASE)])

    # -- locations ----------------------------------------------------------------------

    def root(self) -> Loc | None:
        return self._root

    def child(self, loc: Loc, key: str | int) -> Loc | None:
        if isinstance(key, int) and key >= loc.max_prefix:
            key = loc.max_prefix
        memo = (id(loc), key)
        if memo in self._memo:
            return self._memo[memo]
        nodes: list[Node] = []
        for node in loc.nodes:
            nodes.extend(self._children(node, key))
        out = self._loc(nodes)
        if len(self._memo) < _MEMO_ENTRIES:
            self._memo[memo] = out
        return out

    def unique(self, loc: Loc | None) -> bool:
        return loc is not None and loc.unique

    def _children(self, node: Node, key: str | int) -> list[Node]:
        schema = node.schema
        base = self.index.base_of(schema, node.base)
        p = node.pointer
        if isinstance(key, str):
            matched = False
            props = schema.get("properties")
            if isinstance(props, dict) and key in props:
                matched = True
                yield_ = [Node(props[key], f"{p}/properties/{escape(key)}", base)]
            else:
                yield_ = []
            for pattern, sub in (schema.get("patternProperties") or {}).items():
                if _search(pattern, key):
                    matched = True
                    yield_.append(Node(sub, f"{p}/patternProperties/{escape(pattern)}", base))
            if not matched and "additionalProperties" in schema:
                extra = schema["additionalProperties"]
                yield_.append(Node(extra, f"{p}/additionalProperties", base))
            return yield_
        items = schema.get("items")
        tuple_key = "items" if isinstance(items, list) else "prefixItems"
        prefix = schema.get(tuple_key) if tuple_key == "items" else schema.get("prefixItems")
        if isinstance(prefix, list) and key < len(prefix):
            return [Node(prefix[key], f"{p}/{tuple_key}/{key}", base)]
        rest = "additionalItems" if isinstance(items, list) else "items"
        if rest in schema and (rest == "items" or self.draft < 2020):
            return [Node(schema[rest], f"{p}/{rest}", base)]
        return []

    def _loc(self, nodes: list[Node]) -> Loc | None:
        expanded: dict[str, Node] = {}
        for node in nodes:
            self._expand(node, expanded, 0)
        reaches = self.analysis.reaches
        if not any(p in reaches for p in expanded):
            return None
        checked = tuple(p for p in expanded if p in self.analysis.checked)
        unique = any(
            "uniqueItems" in self.keywords.get(p, ()) and n.schema.get("uniqueItems") is True
            for p, n in expanded.items()
        )
        prefix = max((_prefix_length(n.schema) for n in expanded.values()), default=0)
        return Loc(tuple(expanded.values()), checked, unique, prefix)

    def _expand(self, node: Node, out: dict[str, Node], depth: int) -> None:
        """``node`` and what applies in place of it unconditionally (``$ref``, ``allOf``)."""
        schema = node.schema
        if not isinstance(schema, dict) or node.pointer in out or depth > _EXPAND_DEPTH:
            return
        base = self.index.base_of(schema, node.base)
        ref = schema.get("$ref")
        if self.draft > 7 or not isinstance(ref, str):
            out[node.pointer] = node
            for i, sub in enumerate(schema.get("allOf") or ()):
                self._expand(Node(sub, f"{node.pointer}/allOf/{i}", base), out, depth + 1)
        if isinstance(ref, str):
            target = self.index.resolve(ref, base, node.pointer)
            self._expand(Node(target.node, target.pointer, target.base), out, depth + 1)

    # -- checks -------------------------------------------------------------------------

    def value_ok(self, loc: Loc, value: Any) -> bool:
        return all(self.validator(p).is_valid(value) for p in loc.checked)

    def validator(self, pointer: str) -> Any:
        found = self._validators.get(pointer)
        if found is None:
            found = self._root_validator.evolve(schema=self._schema_for(pointer))
            self._validators[pointer] = found
        return found

    def _schema_for(self, pointer: str) -> Any:
        """The node itself where its ``$ref``s resolve as from the root (no ``$id`` on the
        way down), else a ``$ref`` to it (resolved with the right base by jsonschema)."""
        node, base = self.index.root, self.index.base_of(self.index.root, DEFAULT_BASE)
        root_base = base
        for raw in pointer.split("/")[1:]:
            token = raw.replace("~1", "/").replace("~0", "~")
            node = node[int(token)] if isinstance(node, list) else node[token]
            base = self.index.base_of(node, base)
        if base == root_base and isinstance(node, dict | bool):
            return node
        return {"$ref": "#" + quote(pointer, safe="/~!$&'()*+,;=:@")}

    def describe(self, failure: Any) -> str:
        """What a refused completion violated, for error messages."""
        if isinstance(failure, tuple):
            _, loc = failure
            pointer = next(
                (n.pointer for n in loc.nodes if "uniqueItems" in self.keywords.get(n.pointer, ())),
                "",
            )
            return f"'uniqueItems' at {pointer or '/'!r}"
        if isinstance(failure, Loc):
            parts = [f"{self._keywords_below(p)} at {p or '/'!r}" for p in failure.checked]
            return "; ".join(parts)
        return "a decode-time check"

    def _keywords_below(self, pointer: str) -> str:
        own = self.keywords.get(pointer)
        if own:
            return ", ".join(repr(k) for k in own)
        return "a conditional subschema's " + ", ".join(
            sorted(
                {repr(k) for p, ks in self.keywords.items() if p.startswith(pointer) for k in ks}
            )
        )

    @staticmethod
    def canonical(value: Any) -> str:
        """Equal JSON values, equal texts (``1.0`` is ``1``; key order does not count)."""
        return canonical_text(value)


def _prefix_length(schema: dict) -> int:
    items = schema.get("items")
    prefix = items if isinstance(items, list) else schema.get("prefixItems")
    return len(prefix) if isinstance(prefix, list) else 0


def _search(pattern: str, key: str) -> bool:
    """jsonschema's test for ``patternProperties`` (``re.search``); an unreadable pattern
    counts as matching, so its subschema is checked too (stricter, never looser)."""
    try:
        return re.search(pattern, key) is not None
    except re.error:
        return True
