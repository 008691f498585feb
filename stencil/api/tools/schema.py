"""The JSON Schemas that constrain tool calls: one call ``{"name": N, <args>: {...}}`` per tool
(its parameters schema embedded, ``$defs`` relocated) and the array of calls."""

from __future__ import annotations

import copy
from typing import Any

from stencil.api.openai.protocol import Tool


def calls_schema(tools: list[Tool], *, single: bool, args_key: str = "arguments") -> dict[str, Any]:
    """A JSON Schema for ``[{"name": N, "arguments": {...}}, ...]`` over ``tools``."""
    defs: dict[str, Any] = {}
    schema: dict[str, Any] = {"type": "array", "items": _item(tools, args_key, defs)}
    schema["minItems"] = 1
    if single:
        schema["maxItems"] = 1
    if defs:
        schema["$defs"] = defs
    return schema


def call_item_schema(tools: list[Tool], args_key: str = "arguments") -> dict[str, Any]:
    """A JSON Schema for one ``{"name": N, args_key: {...}}`` over ``tools``."""
    defs: dict[str, Any] = {}
    item = _item(tools, args_key, defs)
    return {**item, "$defs": defs} if defs else item


def _item(tools: list[Tool], args_key: str, defs: dict[str, Any]) -> dict[str, Any]:
    variants = []
    for i, tool in enumerate(tools):
        params = tool.function.parameters or {"type": "object", "properties": {}}
        args = relocate_schema(params, f"tool{i}_", defs)
        variants.append(
            {
                "type": "object",
                "properties": {"name": {"const": tool.function.name}, args_key: args},
                "required": ["name", args_key],
                "additionalProperties": False,
            }
        )
    return variants[0] if len(variants) == 1 else {"anyOf": variants}


def relocate_schema(schema: dict[str, Any], prefix: str, defs: dict[str, Any]) -> dict[str, Any]:
    """Return ``schema`` made embeddable: its ``$defs``/``definitions`` move into ``defs`` under
    ``prefix`` and every local ``$ref`` is rewritten to match. A ref to the root (``#``) or to
    another pointer inside it makes the whole schema a def of its own."""
    schema = copy.deepcopy(schema)
    for key in ("$schema", "$id"):
        schema.pop(key, None)
    local: dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        for name, sub in (schema.pop(key, None) or {}).items():
            local[f"#/{key}/{name}"] = (f"{prefix}{name}", sub)
    root_name = f"{prefix}root"
    uses_root = [False]

    def rewrite(node: Any) -> Any:
        if isinstance(node, dict):
            out = {k: rewrite(v) for k, v in node.items()}
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#"):
                out["$ref"] = _rewrite_ref(ref, local, root_name, uses_root)
            return out
        if isinstance(node, list):
            return [rewrite(v) for v in node]
        return node

    body = rewrite(schema)
    for new_name, sub in local.values():
        defs[new_name] = rewrite(sub)
    if uses_root[0]:
        defs[root_name] = body
        return {"$ref": f"#/$defs/{root_name}"}
    return body


def _rewrite_ref(
    ref: str, local: dict[str, tuple[str, Any]], root_name: str, uses_root: list[bool]
) -> str:
    for old, (new_name, _) in local.items():
        if ref == old or ref.startswith(old + "/"):
            return f"#/$defs/{new_name}{ref[len(old) :]}"
    uses_root[0] = True
    return f"#/$defs/{root_name}{ref[1:]}"
