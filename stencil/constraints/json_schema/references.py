"""``format: iri`` / ``iri-reference`` / ``uri-reference`` as patterns (ECMA-262 syntax) the
grammar enforces, each stating its RFC as jsonschema's checker for the format reads it.

- ``iri``, ``iri-reference``: RFC 3987 as ``rfc3987-syntax`` reads it: its ``ucschar`` and
  ``iprivate`` are the Basic Multilingual Plane ranges only, and its ``IPv6address`` has exactly
  the nine forms of its grammar (``[::1]`` is not one). That checker is an Earley parse (~15 ms
  a value), far too slow to run on every candidate token of a mask.
- ``uri-reference``: RFC 3986 as ``rfc3986-validator`` reads it (jsonschema's checker without
  the GPL ``rfc3987``): ASCII only, RFC 3986's nine ``IPv6address`` forms with its
  ``dec-octet`` read as ``[01]?[0-9][0-9]?`` (leading zeros), and, as ``re.match(... $)``
  allows, one newline after the reference.

A pattern costs the grammar's lexer nothing per token. ``tests/constraints/json_schema/
test_reference_formats.py`` holds these patterns to the checkers on generated values.
"""

from __future__ import annotations

_UCS = "\\u00A0-\\uD7FF\\uF900-\\uFDCF\\uFDF0-\\uFFEF"
_PRIVATE = "\\uE000-\\uF8FF"
_UNRESERVED = "A-Za-z0-9\\-._~"
_SUB_DELIMS = "!$&'()*+,;="
_PCT = "%[0-9A-Fa-f]{2}"
_H16 = "[0-9A-Fa-f]{1,4}"


def _chars(*classes: str) -> str:
    """Any one of the character classes, or a percent-encoded octet."""
    return f"(?:[{''.join(classes)}]|{_PCT})"


def _ipv4(octet: str) -> str:
    return f"{octet}(?:\\.{octet}){{3}}"


def _ipv6_rfc3987() -> str:
    """The nine forms of ``rfc3987-syntax``'s ``ipv6address``: ``n`` groups before ``::`` and
    ``6 - n`` (then ``ls32``) after it, for n = 0..5; the full form; and two with ``::`` last
    or before one last group."""
    octet = "(?:[0-9]|[1-9][0-9]|1[0-9]{2}|2[0-4][0-9]|25[0-5])"
    ls32 = f"(?:{_H16}:{_H16}|{_ipv4(octet)})"
    g = f"{_H16}:"
    forms = [f"{g * 6}{ls32}"]
    for before in range(6):
        head = ":".join([_H16] * before)
        forms.append(f"{head}::{g * (5 - before)}{ls32}")
    seven = ":".join([_H16] * 7)
    forms += [f"{seven}::{_H16}", f"{seven}::"]
    return "(?:" + "|".join(forms) + ")"


def _ipv6_rfc3986() -> str:
    """RFC 3986's nine ``IPv6address`` forms: at most ``n`` groups before ``::``, ``6 - n``
    (then ``ls32``, or fewer at the end) after it."""
    octet = "(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)"
    ls32 = f"(?:{_H16}:{_H16}|{_ipv4(octet)})"
    g = f"{_H16}:"
    forms = [f"{g * 6}{ls32}", f"::{g * 5}{ls32}"]
    tails = [f"{g * 4}{ls32}", f"{g * 3}{ls32}", f"{g * 2}{ls32}", f"{g}{ls32}", ls32, _H16, ""]
    for most, tail in enumerate(tails):
        head = f"(?:{g}){{0,{most}}}{_H16}" if most else _H16
        forms.append(f"(?:{head})?::{tail}")
    return "(?:" + "|".join(forms) + ")"


def _reference_patterns(ucs: str, private: str, ipv6: str) -> tuple[str, str]:
    """``(absolute, reference)`` regex bodies over the ``ucs`` characters beside ASCII."""
    unreserved = _UNRESERVED + ucs
    pchar = _chars(unreserved, _SUB_DELIMS, ":@")
    scheme = "[A-Za-z][A-Za-z0-9+\\-.]*"
    userinfo = f"{_chars(unreserved, _SUB_DELIMS, ':')}*"
    future = f"v[0-9A-Fa-f]+\\.[{_UNRESERVED}{_SUB_DELIMS}:]+"
    host = f"(?:\\[(?:{ipv6}|{future})\\]|{_chars(unreserved, _SUB_DELIMS)}*)"
    authority = f"(?:{userinfo}@)?{host}(?::[0-9]*)?"
    segment = f"{pchar}*"
    abempty = f"(?:/{segment})*"
    absolute = f"/(?:{pchar}+(?:/{segment})*)?"
    rootless = f"{pchar}+(?:/{segment})*"
    noscheme = f"{_chars(unreserved, _SUB_DELIMS, '@')}+(?:/{segment})*"
    query = f"(?:\\?{_chars(unreserved, _SUB_DELIMS, ':@/?', private)}*)?"
    fragment = f"(?:#{_chars(unreserved, _SUB_DELIMS, ':@/?')}*)?"
    hier = f"(?://{authority}{abempty}|{absolute}|{rootless})?"
    relative = f"(?://{authority}{abempty}|{absolute}|{noscheme})?"
    full = f"{scheme}:{hier}{query}{fragment}"
    return full, f"(?:{full}|{relative}{query}{fragment})"


_IRI, _IRI_REF = _reference_patterns(_UCS, _PRIVATE, _ipv6_rfc3987())
IRI = f"^{_IRI}$"
IRI_REFERENCE = f"^{_IRI_REF}$"
URI_REFERENCE = f"^{_reference_patterns('', '', _ipv6_rfc3986())[1]}\\n?$"
