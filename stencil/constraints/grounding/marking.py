"""Which strings of a schema are grounded: ``mark_grounded`` replaces each by a sentinel
``const`` (carrying its bounds, span-safe format, sibling claims and pattern) before the usual
JSON Schema translation; numbers and dates are narrowed to the ones the source states. A
grounded string with a date or time ``pattern`` may also take a date or time the source states
in another spelling, normalized (``readings``: ``um 9.15 Uhr`` -> ``09:15``), where the pattern
allows it.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import ConstraintError
from .stated import numbers_in

SENTINEL = "\u0000stencil-grounded:"
EMAIL = r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)+"
_FREE_STRING_KEYS = ("format", "enum", "const", "contentEncoding")
_CODE_PROBES = ("12345", "A1")
# formats a verbatim span can keep, by a regex whose language is inside the format's
SPAN_FORMATS = {
    "email": EMAIL,
    "uri": r"[A-Za-z][A-Za-z0-9+.\-]*:[^\s\x00-\x1f\\\"<>{}|^`]+",
    "uuid": r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}",
    "ipv4": r"(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}"
    r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])",
}


_OWN_KEYS = ("x-grounded", "x-claimed", "properties")


def mark_grounded(
    schema: Any,
    *,
    ground_strings: bool,
    numbers: list[float] | None = None,
    dates: list[str] | None = None,
    readings: tuple[str, ...] = (),
) -> tuple[Any, int]:
    """A copy of ``schema`` with each grounded string replaced by a sentinel ``const`` (length
    bounds and a span-safe format kept), and how many there are. With ``numbers``, every
    ``number`` / ``integer`` subschema without ``enum`` or ``const`` is narrowed to them and
    the numbers its description states (``described_numbers``); with
    ``dates`` (ISO strings), every such ``format: date`` string. A grounded string with a
    date or time ``pattern`` is one of the ``readings`` (normalized values the source states)
    that the pattern and its length bounds allow, a span only where there is none."""
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
            stated = [r for r in readings if _allows(node, r)] if _reads(node) else []
            if stated:  # never a span of one (``11:48`` of ``11:48 PM``)
                return {"type": "string", "enum": stated}
            count += 1
            kept = {k: node[k] for k in ("minLength", "maxLength") if k in node}
            fmt = node.get("format", "")
            # a span-safe format, the kinds of value its siblings claim and a pattern ride along
            tag = f"{SENTINEL}{count}:{fmt}:{'' if fmt else claimed}:{node.get('pattern', '')}"
            return {"type": "string", "const": tag, **kept}
        out = {k: walk(v) for k, v in node.items() if k not in _OWN_KEYS}
        if isinstance(node.get("properties"), dict):
            # an object may claim kinds for properties asked apart (``x-claimed``)
            kinds = claimed_kinds(node["properties"]) | set(node.get("x-claimed", ()))
            kinds = ",".join(sorted(kinds))
            out["properties"] = {k: walk(v, kinds) for k, v in node["properties"].items()}
        if numbers and node.get("type") in ("number", "integer") and not _fixed(node):
            out["enum"] = number_enum(node, numbers)
        if dates and node.get("format") == "date" and not _fixed(node):
            out["enum"] = dates
        return out

    return walk(schema), count


def number_enum(node: dict[str, Any], numbers: list[float]) -> list[float]:
    """The values a ``number`` / ``integer`` subschema may take: ``numbers`` and those its
    description states (``described_numbers``), each once; an integer's whole ones, as ints."""
    stated = dict.fromkeys([*numbers, *described_numbers(node)])
    if node.get("type") == "integer":
        return [int(v) for v in stated if v == int(v)]
    return list(stated)


def described_numbers(node: Any) -> list[float]:
    """The numbers a subschema's own ``description`` states (``0 if free``): values the user
    defines for the field, which a grounded number may take beside the source's."""
    described = node.get("description") if isinstance(node, dict) else None
    return numbers_in(described) if isinstance(described, str) else []


def _groundable_string(node: dict) -> bool:
    if node.get("type") != "string":
        return False
    free = [k for k in _FREE_STRING_KEYS if k in node]
    return not free or (free == ["format"] and node["format"] in SPAN_FORMATS)


def _reads(node: dict) -> bool:
    """Whether a grounded string takes dates and times in the schema's spelling: it has a
    ``pattern`` of that kind, one that refuses a bare number and a code (``^[0-2][0-9]:[0-5]
    [0-9]$`` does; an invoice number's ``[0-9]`` does not: a date is no invoice number)."""
    return "pattern" in node and not any(_allows(node, probe) for probe in _CODE_PROBES)


def _allows(node: dict, value: str) -> bool:
    """Whether a string schema's ``pattern`` (a search) and length bounds allow ``value``
    (a pattern Python cannot read allows nothing here; its spans still can)."""
    if not node.get("minLength", 0) <= len(value) <= node.get("maxLength", len(value)):
        return False
    try:
        return re.search(node["pattern"], value) is not None
    except re.error:
        return False


def claimed_kinds(properties: dict[str, Any]) -> set[str]:
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
