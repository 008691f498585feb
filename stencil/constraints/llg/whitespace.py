"""Whitespace policies for JSON output.

``"bounded"`` (default): at each place JSON allows whitespace, at most one space, or one newline
followed by at most 20 spaces/tabs. Pretty-printed JSON (indent up to 20) and the
``json.dumps`` default (``", "`` and ``": "``) both fit; endless whitespace cannot be emitted.
``"compact"``: no whitespace at all. ``None``: any JSON whitespace (unbounded, as JSON allows).
A user ``whitespace_pattern`` (a regex matched at most once per gap) replaces the policy.
"""

from __future__ import annotations

from typing import Any

BOUNDED_PATTERN = r"[ ]|\n[ \t]{0,20}"
POLICIES = ("bounded", "compact", None)


def guidance_options(whitespace: str | None, whitespace_pattern: str | None) -> dict[str, Any]:
    """The llguidance ``x-guidance`` options for a policy."""
    if whitespace_pattern is not None:
        return {"whitespace_pattern": whitespace_pattern}
    if whitespace == "bounded":
        return {"whitespace_pattern": BOUNDED_PATTERN}
    if whitespace == "compact":
        return {"whitespace_flexible": False}
    return {"whitespace_flexible": True}
