"""Exact ``not`` of the subschemas whose complement enforced keywords can spell: ``{}``,
``type``, ``required``, ``const`` / ``enum`` of scalars, ``properties`` and conjunctions of
these (De Morgan). Used for ``not`` and to rewrite ``if`` / ``then`` / ``else`` into ``anyOf``."""

from __future__ import annotations

from typing import Any

from .keywords import ANNOTATIONS, JSON_TYPES
from .logic import negate as negate_basic
from .logic import not_required

Schema = dict[str, Any] | bool
_MAX_LITERAL_CHARS = 2_000  # total length of the strings a complement pattern spells out
_META = frozenset("\\.+*?()|[]{}^$-&~#/")


def negate(schema: Schema) -> Schema | None:
    """A schema admitting exactly the instances ``schema`` rejects, or None."""
    if isinstance(schema, bool):
        return not schema
    schema = {k: v for k, v in schema.items() if k not in ANNOTATIONS}
    basic = negate_basic(schema)
    if basic is not None:
        return basic
    if len(schema) > 1:  # not (A and B) = not A or not B
        parts = [negate({k: v}) for k, v in schema.items()]
        if any(p is None for p in parts):
            return None
        return {"anyOf": parts}
    if "const" in schema:
        return _not_values([schema["const"]])
    if "enum" in schema:
        return _not_values(list(schema["enum"]))
    if "properties" in schema and isinstance(schema["properties"], dict):
        parts = []
        for name, sub in schema["properties"].items():
            inner = negate(sub)
            if inner is None:
                return None
            if inner is not False:
                props = {name: inner}
                parts.append({"type": "object", "required": [name], "properties": props})
        return {"anyOf": parts} if parts else False
    return None


def _not_values(values: list[Any]) -> Schema | None:
    """Every instance but the given scalar values."""
    kinds = {_kind(v) for v in values}
    if None in kinds:
        return None
    rest: list[Schema] = []
    others = [t for t in JSON_TYPES if t not in kinds and t not in ("integer", "number")]
    if "number" not in kinds:
        others.append("number")
    if others:
        rest.append({"type": others})
    if "number" in kinds:
        rest.extend(_other_numbers(sorted({v for v in values if _kind(v) == "number"})))
    if "string" in kinds:
        pattern = _complement([v for v in values if isinstance(v, str)])
        if pattern is None:
            return None
        rest.append({"type": "string", "pattern": pattern})
    if "boolean" in kinds:
        used = {v for v in values if isinstance(v, bool)}
        if len(used) == 1:
            rest.append({"const": not used.pop()})
    return {"anyOf": rest} if rest else False


def _kind(value: Any) -> str | None:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return None  # arrays and objects: no spelled-out complement


def _other_numbers(points: list[float]) -> list[Schema]:
    """Numbers in the open intervals between (and around) ``points``."""
    out: list[Schema] = [{"type": "number", "exclusiveMaximum": points[0]}]
    for low, high in zip(points, points[1:], strict=False):
        out.append({"type": "number", "exclusiveMinimum": low, "exclusiveMaximum": high})
    out.append({"type": "number", "exclusiveMinimum": points[-1]})
    return out


def _complement(strings: list[str]) -> str | None:
    """An anchored regex for every string not in ``strings`` (a trie, spelled out)."""
    if sum(len(s) + 1 for s in strings) > _MAX_LITERAL_CHARS:
        return None
    trie: dict = {}
    for s in strings:
        node = trie
        for c in s:
            node = node.setdefault(c, {})
        node[""] = {}
    return "^" + _outside(trie) + "$"


def _outside(node: dict) -> str:
    """Strings that leave the trie at ``node`` (or stop at a node that ends no member)."""
    children = sorted(k for k in node if k)
    alts = [] if "" in node else [""]
    if children:
        # NUL apart: a class of every control character that lacks `"` or `\\` is quoted
        # wrongly by llguidance (`quoted_classes`); NUL beside it as a concatenation is not
        # merged into it
        alts.append("[^" + "".join(_esc(c) for c in children) + "\\x00][\\s\\S]*")
        if "\x00" not in children:
            alts.append("\\x00[\\s\\S]*")
    else:
        alts.append("[\\s\\S]+")
    alts.extend(_esc(c) + _outside(node[c]) for c in children)
    return "(?:" + "|".join(alts) + ")"


def _esc(c: str) -> str:
    if c in _META:
        return "\\" + c
    if not c.isprintable() or not c.isascii():
        return f"\\u{{{ord(c):x}}}"
    return c


__all__ = ["negate", "not_required"]
