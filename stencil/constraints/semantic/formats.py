"""Format semantics for decode-time checks: jsonschema's ``FormatChecker`` (with whatever
optional checker packages are installed: ``jsonschema[format-nongpl]``) plus the formats
Pydantic emits, checked the way Pydantic validates them."""

from __future__ import annotations

import base64
import binascii
import datetime
import ipaddress
import json
from collections.abc import Callable
from typing import Any

import jsonschema


def _ip(parse: Callable[[str], Any]) -> Callable[[object], bool]:
    def check(instance: object) -> bool:
        if not isinstance(instance, str):
            return True
        try:
            parse(instance)
        except ValueError:
            return False
        return True

    return check


def _base64(decode: Callable[[bytes], bytes]) -> Callable[[object], bool]:
    """Pydantic's ``Base64Bytes`` / ``Base64Str`` (and their ``Url`` forms) decode with the
    standard library; the decoded bytes are also required to be UTF-8, so that the value is
    valid for ``Base64Str`` too (a stricter check, never a looser one)."""

    def check(instance: object) -> bool:
        if not isinstance(instance, str):
            return True
        try:
            decode(instance.encode("ascii")).decode("utf-8")
        except (binascii.Error, ValueError):
            return False
        return True

    return check


def _json_string(instance: object) -> bool:
    if not isinstance(instance, str):
        return True
    try:
        json.loads(instance)
    except ValueError:
        return False
    return True


def _pydantic_email(instance: object) -> bool:
    """Pydantic's ``EmailStr`` / ``NameEmail`` (email-validator, no deliverability check)."""
    if not isinstance(instance, str):
        return True
    from pydantic.networks import validate_email
    from pydantic_core import PydanticCustomError

    try:
        validate_email(instance)
    except (PydanticCustomError, ValueError):
        return False
    return True


def _duration(iso_check: Callable[[object], bool] | None) -> Callable[[object], bool]:
    """ISO 8601 durations as jsonschema checks them, and within Pydantic's ``timedelta``
    range (speedate refuses components too large to hold)."""
    from pydantic import TypeAdapter

    adapter = TypeAdapter(datetime.timedelta)

    def check(instance: object) -> bool:
        if not isinstance(instance, str):
            return True
        if iso_check is not None and not iso_check(instance):
            return False
        try:
            adapter.validate_python(instance)
        except ValueError:
            return False
        return True

    return check


def email_validator_available() -> bool:
    try:
        import email_validator  # noqa: F401
        import pydantic.networks  # noqa: F401
    except ImportError:
        return False
    return True


PYDANTIC_FORMATS: dict[str, Callable[[object], bool]] = {
    "ipvanyaddress": _ip(ipaddress.ip_address),
    "ipvanyinterface": _ip(ipaddress.ip_interface),
    "ipvanynetwork": _ip(ipaddress.ip_network),
    "ipv4network": _ip(ipaddress.IPv4Network),
    "ipv6network": _ip(ipaddress.IPv6Network),
    "ipv4interface": _ip(ipaddress.IPv4Interface),
    "ipv6interface": _ip(ipaddress.IPv6Interface),
    "base64": _base64(base64.b64decode),
    "base64url": _base64(base64.urlsafe_b64decode),
    "json-string": _json_string,
}
EMAIL_FORMATS = ("email", "name-email")
"""Checked with Pydantic's email validation when ``email-validator`` is installed (stricter
than jsonschema's ``"@" in value``, so outputs pass both)."""


def checked_formats(draft_checker: jsonschema.FormatChecker) -> frozenset[str]:
    """Formats a decode-time check can enforce with the packages installed here."""
    names = set(draft_checker.checkers) | set(PYDANTIC_FORMATS) | {"duration"}
    if email_validator_available():
        names.update(EMAIL_FORMATS)
    return frozenset(names)


def _plain(check: Callable[[object], Any]) -> Callable[[object], bool]:
    """A jsonschema format function (which may raise) as a plain predicate."""

    def predicate(instance: object) -> bool:
        try:
            return bool(check(instance))
        except Exception:  # noqa: BLE001 - jsonschema's checkers raise their parsers' errors
            return False

    return predicate


def format_checker(validator_class: Any) -> jsonschema.FormatChecker:
    """A fresh checker: jsonschema's checkers (2020-12's, then the draft's own: a format
    the translator enforces is checked whatever the draft), plus Pydantic's formats."""
    checker = jsonschema.FormatChecker(())
    checker.checkers = {
        **jsonschema.Draft202012Validator.FORMAT_CHECKER.checkers,
        **validator_class.FORMAT_CHECKER.checkers,
    }
    for name, check in PYDANTIC_FORMATS.items():
        checker.checks(name)(check)
    iso = checker.checkers.get("duration")
    checker.checks("duration")(_duration(_plain(iso[0]) if iso else None))
    if email_validator_available():
        for name in EMAIL_FORMATS:
            checker.checks(name)(_pydantic_email)
    return checker
