"""Which JSON Schema keywords Stencil enforces, translates, ignores (annotations) or rejects."""

from __future__ import annotations

from .dates import DATE_TIME, FULL_DATE, FULL_TIME
from .references import IRI, IRI_REFERENCE, URI_REFERENCE

# Keywords whose value is one subschema / a list of subschemas / a map of subschemas.
SCHEMA_VALUE_KEYWORDS = frozenset(
    {
        "additionalProperties",
        "not",
        "if",
        "then",
        "else",
        "contains",
        "propertyNames",
        "additionalItems",
        "unevaluatedItems",
        "unevaluatedProperties",
        "contentSchema",
    }
)
SCHEMA_LIST_KEYWORDS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
SCHEMA_MAP_KEYWORDS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)

# Passed to llguidance unchanged (it enforces them exactly).
ENFORCED = frozenset(
    {
        "type",
        "enum",
        "const",
        "required",
        "minLength",
        "maxLength",
        "pattern",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
    }
)

# Rewritten by Stencil into enforced keywords (see normalize.py).
TRANSLATED = frozenset(
    {
        "$ref",
        "properties",
        "patternProperties",
        "additionalProperties",
        "items",
        "prefixItems",
        "additionalItems",
        "anyOf",
        "allOf",
        "oneOf",
        "not",
        "format",
        "dependencies",
        "dependentRequired",
        "dependentSchemas",
        "uniqueItems",
        "if",
        "then",
        "else",
        "propertyNames",
        "contains",
        "minContains",
        "maxContains",
        "unevaluatedProperties",
        "unevaluatedItems",
    }
)

# Accepted and ignored: they never restrict the instance.
ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "example",
        "$schema",
        "$id",
        "id",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
        "contentEncoding",
        "contentMediaType",
        "contentSchema",
        "$anchor",
        "$dynamicAnchor",
        "$recursiveAnchor",
        "$vocabulary",
        "$defs",
        "definitions",
        "discriminator",
        "nullable",
        "x-guidance",
    }
)

# Valid keywords Stencil cannot enforce at all: UnsupportedSchemaError. (Those a grammar
# cannot state exactly are checked as values complete: see approximate.py.)
UNSUPPORTED = frozenset({"$dynamicRef", "$recursiveRef"})


def _uuid(version: int) -> str:
    """Pydantic's ``UUID1`` ... ``UUID8``: the version nibble, the RFC 4122 variant."""
    hexd = "[0-9a-fA-F]"
    return f"^{hexd}{{8}}-{hexd}{{4}}-{version}{hexd}{{3}}-[89abAB]{hexd}{{3}}-{hexd}{{12}}$"


# String formats llguidance enforces natively.
NATIVE_FORMATS = frozenset({"duration", "email", "hostname", "ipv4", "ipv6", "uuid", "uri"})
# Formats Stencil enforces by a pattern of its own, or by an equivalent native format.
FORMAT_PATTERNS = {
    # not llguidance's: see dates.py (year 0000, February 29, second 60)
    "date": FULL_DATE,
    "date-time": DATE_TIME,
    "time": FULL_TIME,
    "json-pointer": r"^(/([^~/]|~[01])*)*$",
    **{f"uuid{v}": _uuid(v) for v in range(1, 9)},
    "base64": r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$",
    "base64url": r"^(?:[A-Za-z0-9_\-]{4})*(?:[A-Za-z0-9_\-]{2}==|[A-Za-z0-9_\-]{3}=)?$",
    "relative-json-pointer": r"^(0|[1-9][0-9]*)(#|(/([^~/]|~[01])*)*)$",
    "iri": IRI,
    "iri-reference": IRI_REFERENCE,
    "uri-reference": URI_REFERENCE,
}
# Formats checked at decode time: a pattern admitting at least every valid value keeps the
# grammar close (no whitespace in a host name, say), so that a value can still end validly
# (test_format_supersets.py holds each to its checker). `uri-template` has none: its checker
# takes any text outside the braces.
_IP6 = "[0-9A-Fa-f:.]+(?:%[^%/]+)?"  # an IPv6 zone ("%eth0") takes any text but % and /
FORMAT_SUPERSETS = {
    "idn-hostname": "^[^\\u0000-\\u0020]+$",
    "idn-email": "^[\\s\\S]*@[\\s\\S]*$",
    "ipvanyaddress": f"^{_IP6}$",
    "ipvanyinterface": f"^{_IP6}(?:/[^/]+)?$",
    "ipvanynetwork": f"^{_IP6}(?:/[^/]+)?$",
    "ipv4network": "^[0-9./]+$",
    "ipv4interface": "^[0-9./]+$",
    "ipv6network": f"^{_IP6}(?:/[^/]+)?$",
    "ipv6interface": f"^{_IP6}(?:/[^/]+)?$",
}
# Formats defined by the JSON Schema specifications that Stencil cannot enforce: rejected.
# Any other (custom) format is an annotation, as the specification says, with a warning.
UNENFORCEABLE_FORMATS = frozenset(
    {
        "idn-email",
        "idn-hostname",
        "uri-template",
        "regex",
        "color",
    }
)

JSON_TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")
