"""JSON Schema patterns are ECMA-262 regular expressions; llguidance parses Rust ``regex``
syntax. Where the two read the same text differently, spell ECMA's meaning out.

ECMA-262 (2024) §22.2.2.9 CharacterClassEscape, without the ``i`` / ``u`` / ``s`` flags
(JSON Schema patterns have none):

- ``\\d`` is ``[0-9]`` and ``\\w`` is ``[A-Za-z0-9_]`` (Rust: any Unicode digit / word char);
- ``\\s`` is WhiteSpace (§12.2: TAB, VT, FF, U+FEFF, any Zs) plus LineTerminator (§12.3: LF,
  CR, U+2028, U+2029); Rust's Unicode ``White_Space`` also has U+0085 and lacks U+FEFF;
- ``\\D``, ``\\W``, ``\\S`` are their complements;
- ``.`` (§22.2.2.7) is any character but a LineTerminator (Rust: any but LF).

Each is rewritten to an explicit class, inside brackets too (``[a\\d]``), as code-point
ranges that Rust and Python ``re`` read alike. Escaped backslashes (``\\\\d``) stay literal.
``guided_regex`` / ``Constraint.regex`` are not JSON Schema and keep Rust semantics.
"""

from __future__ import annotations

from collections.abc import Iterator

Ranges = tuple[tuple[int, int], ...]  # inclusive code-point ranges, sorted, disjoint

_MAX_CODE_POINT = 0x10FFFF
_DIGIT: Ranges = ((0x30, 0x39),)
_WORD: Ranges = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
_LINE_TERMINATOR: Ranges = ((0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029))
_SPACE: Ranges = (
    (0x09, 0x0D),  # TAB LF VT FF CR
    (0x20, 0x20),
    (0xA0, 0xA0),
    (0x1680, 0x1680),
    (0x2000, 0x200A),
    (0x2028, 0x2029),
    (0x202F, 0x202F),
    (0x205F, 0x205F),
    (0x3000, 0x3000),
    (0xFEFF, 0xFEFF),
)


def ecma_pattern(pattern: str) -> str:
    """``pattern`` with ECMA-262's ``\\d \\w \\s \\D \\W \\S`` and ``.`` as explicit classes."""
    out: list[str] = []
    depth, i = 0, 0  # depth: nesting of bracket classes, as Rust parses them
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            out.append(_escape(pattern[i + 1], inside=depth > 0) or pattern[i : i + 2])
            i += 2
            continue
        if c == "[":
            start = i
            i += 1 + (pattern[i + 1 : i + 2] == "^")
            i += pattern[i : i + 1] == "]"  # a leading "]" is a literal
            out.append(pattern[start:i])
            depth += 1
            continue
        if c == "]" and depth:
            depth -= 1
        out.append(_class(_LINE_TERMINATOR, negated=True) if c == "." and not depth else c)
        i += 1
    return "".join(out)


def _escape(letter: str, *, inside: bool) -> str | None:
    """The class for escape ``\\letter``, or None when ECMA and Rust agree on it."""
    ranges = _class_escape(letter.lower())
    if ranges is None:
        return None
    negated = letter.isupper()
    if inside:  # spliced into the enclosing class: spell a negation as the complement
        return _body(_complement(ranges) if negated else ranges)
    return _class(ranges, negated=negated)


def _class_escape(letter: str) -> Ranges | None:
    if letter == "d":
        return _DIGIT
    if letter == "w":
        return _WORD
    if letter == "s":
        return _SPACE
    return None


def _complement(ranges: Ranges) -> Ranges:
    out, low = [], 0
    for first, last in ranges:
        if first > low:
            out.append((low, first - 1))
        low = last + 1
    if low <= _MAX_CODE_POINT:
        out.append((low, _MAX_CODE_POINT))
    return tuple(out)


def _class(ranges: Ranges, *, negated: bool) -> str:
    return "[" + "^" * negated + _body(ranges) + "]"


def _body(ranges: Ranges) -> str:
    return "".join(
        _char(first) if first == last else f"{_char(first)}-{_char(last)}" for first, last in ranges
    )


def _char(code_point: int) -> str:
    """A code point as a class member: ASCII letters, digits and ``_`` as themselves."""
    char = chr(code_point)
    if char.isascii() and (char.isalnum() or char == "_"):
        return char
    return f"\\u{code_point:04x}" if code_point <= 0xFFFF else f"\\U{code_point:08x}"


def structure(pattern: str, start: int = 0) -> Iterator[tuple[int, str, int]]:
    """``(index, character, depth)`` for each character of ``pattern`` from ``start`` that is
    neither escaped nor inside a bracket class (a leading ``]`` in one is a literal); ``depth``
    counts the groups open before the character."""
    depth, i, in_class = 0, start, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            i += pattern[i + 1 : i + 2] == "]"
        else:
            yield i, c, depth
            depth += (c == "(") - (c == ")")
        i += 1
