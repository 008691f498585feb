"""``format: iri`` / ``iri-reference`` as patterns (ECMA-262 syntax) the grammar enforces.

They state RFC 3987 as ``rfc3987-syntax`` (jsonschema's checker for these formats) reads it:
its ``ucschar`` and ``iprivate`` are the Basic Multilingual Plane ranges only, and its
``IPv6address`` has exactly the nine forms of its grammar (``[::1]`` is not one). That checker
is an Earley parse (~15 ms a value), far too slow to run on every candidate token of a mask;
a pattern costs the grammar's lexer nothing per token. ``tests/constraints/json_schema/
test_iri_format.py`` holds these patterns to the checker on generated values.
"""

from __future__ import annotations

_UCS = "\\u00A0-\\uD7FF\\uF900-\\uFDCF\\uFDF0-\\uFFEF"
_PRIVATE = "\\uE000-\\uF8FF"
_UNRESERVED = "A-Za-z0-9\\-._~"
_SUB_DELIMS = "!$&'()*+,;="
_PCT = "%[0-9A-Fa-f]{2}"


def _chars(*classes: str) -> str:
    """Any one of the character classes, or a percent-encoded octet."""
    return f"(?:[{''.join(classes)}]|{_PCT})"


_IUNRESERVED = _UNRESERVED + _UCS
_IPCHAR = _chars(_IUNRESERVED, _SUB_DELIMS, ":@")
_H16 = "[0-9A-Fa-f]{1,4}"
_DEC_OCTET = "(?:[0-9]|[1-9][0-9]|1[0-9]{2}|2[0-4][0-9]|25[0-5])"
_IPV4 = f"{_DEC_OCTET}(?:\\.{_DEC_OCTET}){{3}}"
_LS32 = f"(?:{_H16}:{_H16}|{_IPV4})"


def _ipv6() -> str:
    """The nine forms of ``rfc3987-syntax``'s ``ipv6address``: ``n`` groups before ``::`` and
    ``6 - n`` (then ``ls32``) after it, for n = 0..5; the full form; and two with ``::`` last
    or before one last group."""
    g = f"{_H16}:"
    forms = [f"{g * 6}{_LS32}"]
    for before in range(6):
        head = ":".join([_H16] * before)
        after = 5 - before
        forms.append(f"{head}::{g * after}{_LS32}")
    seven = ":".join([_H16] * 7)
    forms += [f"{seven}::{_H16}", f"{seven}::"]
    return "(?:" + "|".join(forms) + ")"


def _iri_patterns() -> tuple[str, str]:
    scheme = "[A-Za-z][A-Za-z0-9+\\-.]*"
    userinfo = f"{_chars(_IUNRESERVED, _SUB_DELIMS, ':')}*"
    future = f"v[0-9A-Fa-f]+\\.[{_UNRESERVED}{_SUB_DELIMS}:]+"
    host = f"(?:\\[(?:{_ipv6()}|{future})\\]|{_chars(_IUNRESERVED, _SUB_DELIMS)}*)"
    authority = f"(?:{userinfo}@)?{host}(?::[0-9]*)?"
    segment = f"{_IPCHAR}*"
    abempty = f"(?:/{segment})*"
    absolute = f"/(?:{_IPCHAR}+(?:/{segment})*)?"
    rootless = f"{_IPCHAR}+(?:/{segment})*"
    noscheme = f"{_chars(_IUNRESERVED, _SUB_DELIMS, '@')}+(?:/{segment})*"
    query = f"(?:\\?{_chars(_IUNRESERVED, _SUB_DELIMS, ':@/?', _PRIVATE)}*)?"
    fragment = f"(?:#{_chars(_IUNRESERVED, _SUB_DELIMS, ':@/?')}*)?"
    hier = f"(?://{authority}{abempty}|{absolute}|{rootless})?"
    relative = f"(?://{authority}{abempty}|{absolute}|{noscheme})?"
    iri = f"{scheme}:{hier}{query}{fragment}"
    return f"^{iri}$", f"^(?:{iri}|{relative}{query}{fragment})$"


IRI, IRI_REFERENCE = _iri_patterns()
