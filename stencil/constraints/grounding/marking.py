"""Which strings of a schema are grounded: ``mark_grounded`` replaces each by a sentinel
``const`` (carrying its bounds, span-safe format, sibling claims and pattern) before the usual
JSON Schema translation; numbers and dates are narrowed to the ones the source states.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConstraintError

SENTINEL = "\u0000stencil-grounded:"
EMAIL = r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)+"
_FREE_STRING_KEYS = ("format", "pattern", "enum", "const", "contentEncoding")
# formats a verbatim span can keep, by a regex whose language is inside the format's
SPAN_FORMATS = {"email": EMAIL}


def mark_grounded(
    schema: Any,
    *,
    ground_strings: bool,
    numbers: list[float] | None = None,
    dates: list[str] | None = None,
) -> tuple[Any, int]:
    """A copy of ``schema`` with each grounded string replaced by a sentinel ``const`` (length
    bounds and a span-safe format kept), and how many there are. With ``numbers``, every
    ``number`` / ``integer`` subschema without ``enum`` or ``const`` is narrowed to them; with
    ``dates`` (ISO strings), every such ``format: date`` string."""
    count = 0

    def walk(node: Any, claimed: str = "") -> Any:
        nonlocal count
        if isinstance(node, list):
            return [walk(v) for v in node]
        if not isinstance(node, dict):
            return node
        flag = node.get("x-grounded")
        if flag is not None and not isinstance(flag, bool):
            raise ConstraintError("x-grounded must be true or false")
        if flag or (flag is None and ground_strings and _groundable_string(node)):
            if node.get("type") != "string":
                raise ConstraintError('x-grounded applies to {"type": "string"} subschemas only')
            count += 1
            kept = {k: node[k] for k in ("minLength", "maxLength") if k in node}
            fmt = node.get("format", "")
            # a span-safe format, the kinds of value its siblings claim and a pattern ride along
            tag = f"{SENTINEL}{count}:{fmt}:{'' if fmt else claimed}:{node.get('pattern', '')}"
            return {"type": "string", "const": tag, **kept}
        out = {k: walk(v) for k, v in node.items() if k not in ("x-grounded", "properties")}
        if isinstance(node.get("properties"), dict):
            kinds = ",".join(sorted(_claimed_kinds(node["properties"])))
            out["properties"] = {k: walk(v, kinds) for k, v in node["properties"].items()}
        if numbers and node.get("type") in ("number", "integer") and not _fixed(node):
            wanted = [v for v in numbers if node["type"] == "number" or v == int(v)]
            out["enum"] = [int(v) if node["type"] == "integer" else v for v in wanted]
        if dates and node.get("format") == "date" and not _fixed(node):
            out["enum"] = dates
        return out

    return walk(schema), count


def _groundable_string(node: dict) -> bool:
    if node.get("type") != "string":
        return False
    free = [k for k in _FREE_STRING_KEYS if k in node]
    return not free or (free == ["format"] and node["format"] in SPAN_FORMATS)


def _claimed_kinds(properties: dict[str, Any]) -> set[str]:
    """The kinds of value (``_CLAIMED``) that properties of one object take by type or format."""
    kinds = set()
    for sub in properties.values():
        if not isinstance(sub, dict):
            continue
        fmt = sub.get("format")
        if fmt == "email":
            kinds.add("email")
        elif fmt in ("date", "date-time"):
            kinds.add("date")
        elif sub.get("type") == "number":
            kinds.add("number")
    return kinds


def _fixed(node: dict) -> bool:
    return "enum" in node or "const" in node


def uses_grounding(schema: Any) -> bool:
    """Whether any subschema says ``"x-grounded": true``."""
    if isinstance(schema, dict):
        return schema.get("x-grounded") is True or any(uses_grounding(v) for v in schema.values())
    if isinstance(schema, list):
        return any(uses_grounding(v) for v in schema)
    return False
