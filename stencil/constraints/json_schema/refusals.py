"""llguidance's refusals of a translated schema, named in the user's terms: the keyword, the
JSON pointer where it sits in the user's document (not the translator's generated ``$defs``),
and what to write instead where an exact alternative exists."""

from __future__ import annotations

import json
import re
from typing import Any

from ..errors import ConstraintError, InvalidSchemaError, UnsupportedSchemaError
from ..llg.errors import schema_error
from .refs import escape

_CIRCULAR = re.compile(r"circular references with sibling keys.*?#/\$defs/(d\d+)", re.S)
_UNSATISFIABLE = re.compile(r"required property '([^']*)' is unsatisfiable")


def refusal(message: str, normalized: Any, root: Any) -> ConstraintError:
    """The error for llguidance's ``message`` about ``normalized`` (a ``Normalized``)."""
    if m := _CIRCULAR.search(message):
        target = normalized.def_pointers.get(m.group(1), "")
        return UnsupportedSchemaError(
            "$ref",
            normalized.ref_sites.get(m.group(1), ""),
            f"the recursive subschema at {target or '/'!r} is intersected with other "
            "keywords where it recurs, which llguidance cannot expand inside the recursion",
        )
    if m := _UNSATISFIABLE.search(message):
        return InvalidSchemaError(
            f"required property {m.group(1)!r} can take no value (its subschemas together, "
            "or an object closed to it, admit none): no instance is valid",
            _required_at(root, m.group(1)),
        )
    return schema_error(message, normalized.keyword_pointers, normalized.one_of_pointers)


def _required_at(node: Any, name: str, pointer: str = "") -> str:
    """Pointer of the first ``required`` that lists ``name``, or ""."""
    if isinstance(node, dict):
        if isinstance(node.get("required"), list) and name in node["required"]:
            return f"{pointer}/required"
        items = node.items()
    elif isinstance(node, list):
        items = enumerate(node)
    else:
        return ""
    for key, value in items:
        found = _required_at(value, name, f"{pointer}/{escape(str(key))}")
        if found:
            return found
    return ""


def dynamic_ref(keyword: str, value: Any, here: str, root: Any) -> UnsupportedSchemaError:
    """``$dynamicRef`` / ``$recursiveRef`` are refused; where the document's anchors make one
    mean a plain ``$ref`` (no ``$recursiveAnchor: true``; at most one ``$dynamicAnchor`` of
    its name), the message says to write that."""
    if keyword == "$recursiveRef":
        same = not _anchors(root, "$recursiveAnchor", True)
    else:
        name = value.partition("#")[2] if isinstance(value, str) else ""
        plain = name and not name.startswith("/")  # an anchor name, not a JSON pointer
        same = not plain or len(_anchors(root, "$dynamicAnchor", name)) == 1
    if same:
        return UnsupportedSchemaError(
            keyword, here, f'it means $ref here: write {{"$ref": {json.dumps(value)}}}'
        )
    return UnsupportedSchemaError(keyword, here, "dynamic scope is not supported")


def _anchors(node: Any, keyword: str, value: Any) -> list[Any]:
    if isinstance(node, dict):
        own = [node] if node.get(keyword) == value else []
        return own + [a for v in node.values() for a in _anchors(v, keyword, value)]
    if isinstance(node, list):
        return [a for v in node for a in _anchors(v, keyword, value)]
    return []
