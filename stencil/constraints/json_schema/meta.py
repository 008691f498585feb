"""Fast meta-schema validation: the 2019-09 and 2020-12 meta-schemas as one document each.

Both meta-schemas are an ``allOf`` of vocabulary meta-schemas tied together by dynamic
references (``$dynamicRef: "#meta"``, ``$recursiveRef: "#"``), which jsonschema resolves
through its dynamic scope at every node: ~1 ms per schema, the largest single cost of a
compile. Validating a document from the top, every dynamic reference resolves to the
top-level meta-schema, so the vocabularies can be merged into one document whose dynamic
references are plain ``$ref: "#"``: the same language, with static references only.

``fast_meta_validator`` builds that document from jsonschema's own copies of the
meta-schemas and refuses (returns None) whenever a vocabulary holds anything the merge does
not account for, so a later jsonschema release with different meta-schemas falls back to
the dynamic ones rather than to a wrong merge. Callers use it only to accept quickly: any
error it reports is re-derived with the original meta-schema.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urljoin

import jsonschema
from jsonschema_specifications import REGISTRY

_MERGED_KEYS = frozenset({"type", "properties", "$defs", "allOf"})
_DROPPED_KEYS = frozenset(
    {
        "$schema",
        "$id",
        "$vocabulary",
        "$dynamicAnchor",
        "$recursiveAnchor",
        "$comment",
        "title",
        "description",
    }
)
_OBJECT_OR_BOOLEAN = ["object", "boolean"]


class _NotMergeable(Exception):
    pass


def fast_meta_validator(cls: type) -> Any | None:
    """A validator of ``cls``'s meta-schema with static references only, or None when
    ``cls`` has no dynamic meta-schema or its meta-schema cannot be merged exactly."""
    if cls not in (jsonschema.Draft201909Validator, jsonschema.Draft202012Validator):
        return None
    try:
        merged = _merge(cls.META_SCHEMA)
    except _NotMergeable:
        return None
    return cls(merged)


def _merge(root: dict[str, Any]) -> dict[str, Any]:
    base = root["$id"]
    parts = [(base, root)]
    for member in root.get("allOf", ()):
        if set(member) != {"$ref"}:
            raise _NotMergeable
        uri = urljoin(base, member["$ref"])
        parts.append((uri, REGISTRY.contents(uri)))
    properties: dict[str, Any] = {}
    defs: dict[str, Any] = {}
    def_owner: dict[str, str] = {}
    for uri, part in parts:
        unknown = set(part) - _MERGED_KEYS - _DROPPED_KEYS
        if unknown or part.get("type") != _OBJECT_OR_BOOLEAN:
            raise _NotMergeable
        if part is not root and "allOf" in part:
            raise _NotMergeable
        for name, sub in part.get("$defs", {}).items():
            if name in defs:
                raise _NotMergeable
            defs[name] = sub
            def_owner[name] = uri
        for name, sub in part.get("properties", {}).items():
            sub = _static(sub, uri)
            properties[name] = {"allOf": [properties[name], sub]} if name in properties else sub
    out_defs = {name: _static(sub, def_owner[name]) for name, sub in defs.items()}
    # every "#/$defs/x" must name the vocabulary the reference was written in
    for uri, part in parts:
        _check_def_refs(part, uri, def_owner)
    merged: dict[str, Any] = {
        "$schema": root["$schema"],
        "type": list(_OBJECT_OR_BOOLEAN),
        "properties": properties,
    }
    if out_defs:
        merged["$defs"] = out_defs
    return merged


def _static(node: Any, uri: str) -> Any:
    """``node`` with dynamic references to the top as ``$ref: "#"`` and definition
    references as local ``#/$defs/...`` (raises for anything else)."""
    if isinstance(node, list):
        return [_static(v, uri) for v in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "$dynamicRef":
            if value != "#meta":
                raise _NotMergeable
            out["$ref"] = "#"
        elif key == "$recursiveRef":
            if value != "#":
                raise _NotMergeable
            out["$ref"] = "#"
        elif key == "$ref":
            target = urljoin(uri, value)
            fragment = target.partition("#")[2]
            if not fragment.startswith("/$defs/") or "/" in fragment[len("/$defs/") :]:
                raise _NotMergeable
            out["$ref"] = "#" + fragment
        elif key in ("$id", "$anchor", "$dynamicAnchor", "$recursiveAnchor"):
            raise _NotMergeable
        else:
            out[key] = _static(value, uri)
    return out


def _check_def_refs(node: Any, uri: str, def_owner: dict[str, str]) -> None:
    if isinstance(node, list):
        for v in node:
            _check_def_refs(v, uri, def_owner)
        return
    if not isinstance(node, dict):
        return
    ref = node.get("$ref")
    if isinstance(ref, str):
        doc, _, fragment = urljoin(uri, ref).partition("#")
        if fragment and def_owner.get(fragment[len("/$defs/") :]) != doc:
            raise _NotMergeable
    for key, value in node.items():
        if key != "$ref":
            _check_def_refs(value, uri, def_owner)
