"""Patterns whose JSON quoting llguidance gets wrong, rewritten so that it gets them right.

llguidance enforces a string's ``pattern`` on the string's JSON spelling: it quotes the regex
over decoded characters (derivre's ``json_quote``), spelling ``\\`` as ``\\\\``, ``"`` as ``\\"``
and a control character as its short escape or ``\\u00XX``. One case is wrong: a byte set
holding every control character (or every one but LF) is quoted as "a backslash and any escape
letter", so the spellings ``\\\\`` and ``\\"`` pass even where the set excludes ``\\`` or ``"``:
``^[^\\\\]+$`` accepted ``"js\\\\sub"``. Such a set is *unsafe*. derivre merges the
single-character branches of one alternation into one byte set, so the unit looked at is an
alternation's single-character branches together (``Alternation.merged``).

Each unsafe set is made safe, exactly, where the pattern allows it:

- **split repeat**: a set ``C`` under ``*`` / ``+`` is ``(?:C'+|\\x00)`` under the same
  quantifier, ``C'`` being ``C`` without NUL: the language is the same, NUL stays a byte of its
  own (a repeat is never merged with it) and ``C'`` lacks a control character;
- **guard**: where an anchored pattern admits neither ``\\`` nor ``"`` (whichever the unsafe sets
  exclude) anywhere, a second pattern ``^(?:[^\\\\"\\x00]+|\\x00)*$`` (safe by the same split) is
  intersected with it (llguidance intersects after quoting): the wrong spellings decode to a
  character the pattern never admits, so the guard removes exactly them.

What is left (an unsafe single character beside a ``\\`` the pattern admits elsewhere, a set
this module cannot read) keeps its pattern, a superset, and is checked as the string completes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import regex

_CONTROL = frozenset(range(0x20))
_LF, _QUOTE, _BACKSLASH = 0x0A, 0x22, 0x5C
_PROBE_SET = _CONTROL | {_QUOTE, _BACKSLASH}
_PROBE_TEXT = "".join(map(chr, sorted(_PROBE_SET)))
_UNBOUNDED = re.compile(r"(?:\*|\+|\{[01],\})\??$")
_BRACED_HEX = re.compile(r"\\[xu]\{([0-9A-Fa-f]+)\}")
_ZERO_WIDTH = frozenset("bBAz")
_NESTED = re.compile(r"\[|&&|--|~~|\\[pP]")
_FLAGS = re.compile(r"\(\?([a-zA-Z-]*)[:)]")  # (?i) sets flags, (?i: opens a group


@dataclass(slots=True)
class Atom:
    """One character matcher: a bracket class, an escape or a literal character."""

    text: str
    members: frozenset[int] | None = None
    """Which of the probed characters (controls, ``"``, ``\\``) it matches; None: unreadable."""


@dataclass(slots=True)
class Item:
    node: Atom | Alternation | str  # str: zero-width (an anchor, an assertion)
    quantifier: str = ""


@dataclass(slots=True)
class Alternation:
    opening: str  # "(?:", "(", "(?P<name>", ... ; "" at the top level
    branches: list[list[Item]] = field(default_factory=lambda: [[]])

    def singles(self) -> list[Atom]:
        """The single-character branches, nested alternations flattened (as derivre does)."""
        out: list[Atom] = []
        for branch in self.branches:
            if len(branch) == 1 and _plain(branch[0].quantifier):
                node = branch[0].node
                if isinstance(node, Atom):
                    out.append(node)
                elif isinstance(node, Alternation):
                    out.extend(node.singles())
        return out

    def merged(self) -> frozenset[int] | None:
        """The probed members of the byte set its single-character branches merge into."""
        members: set[int] = set()
        for atom in self.singles():
            if atom.members is None:
                return None
            members |= atom.members
        return frozenset(members)

    def all_single(self) -> bool:
        """Every branch is one character (or an alternation of such)."""
        return all(
            len(b) == 1
            and _plain(b[0].quantifier)
            and (
                isinstance(b[0].node, Atom)
                or (isinstance(b[0].node, Alternation) and b[0].node.all_single())
            )
            for b in self.branches
        )


@dataclass(frozen=True, slots=True)
class Guarded:
    pattern: str
    """The pattern for the grammar (rewritten where a split repeat applies)."""
    guard: str | None = None
    """A second pattern to intersect with it, or None."""
    checked: bool = False
    """Unsafe sets are left: the pattern is a superset, to be checked as the string completes."""


def guarded(pattern: str) -> Guarded:
    """``pattern`` (llguidance syntax, ECMA classes spelled out) made safe to JSON-quote."""
    try:
        top = parse(pattern)
    except _Unreadable:
        return Guarded(pattern, checked=True)
    if not _unsafe_sets(top):
        return Guarded(pattern)
    _split_repeats(top)
    rewritten = render(top)
    unsafe = _unsafe_sets(top)
    if not unsafe:
        return Guarded(rewritten)
    excluded = _excluded(unsafe)
    if excluded is not None and _anchored(top) and not _admits(top, excluded):
        body = "".join(_class_char(c) for c in sorted(excluded))
        return Guarded(rewritten, guard=f"^(?:[^{body}\\x00]+|\\x00)*$")
    return Guarded(rewritten, checked=True)


def unsafe(members: frozenset[int] | None) -> bool:
    """Whether a byte set with these probed members is quoted wrongly (None: unknown, yes)."""
    if members is None:
        return True
    controls = members & _CONTROL
    full = controls == _CONTROL or controls == _CONTROL - {_LF}
    return full and not {_QUOTE, _BACKSLASH} <= members


# -- analysis -----------------------------------------------------------------------------


def _alternations(node: Alternation):
    yield node
    for branch in node.branches:
        for item in branch:
            if isinstance(item.node, Alternation):
                yield from _alternations(item.node)


def _atoms(node: Alternation):
    for branch in node.branches:
        for item in branch:
            if isinstance(item.node, Atom):
                yield item.node
            elif isinstance(item.node, Alternation):
                yield from _atoms(item.node)


def _unsafe_sets(top: Alternation) -> list[frozenset[int] | None]:
    """The merged byte sets (of alternations and of lone atoms) that are unsafe."""
    out = []
    for alt in _alternations(top):
        if alt.singles() and unsafe(alt.merged()):
            out.append(alt.merged())
        for branch in alt.branches:
            if len(branch) == 1 and _plain(branch[0].quantifier):
                continue  # merged into the alternation's set
            out.extend(
                i.node.members
                for i in branch
                if isinstance(i.node, Atom) and unsafe(i.node.members)
            )
    return out


def _excluded(sets: list[frozenset[int] | None]) -> frozenset[int] | None:
    """The characters an unsafe set lets through wrongly (``"`` / ``\\`` it lacks)."""
    out: set[int] = set()
    for members in sets:
        if members is None:
            return None
        out |= {_QUOTE, _BACKSLASH} - members
    return frozenset(out)


def _admits(top: Alternation, chars: frozenset[int]) -> bool:
    return any(a.members is None or a.members & chars for a in _atoms(top))


def _anchored(top: Alternation) -> bool:
    """One top-level branch from ``^`` to ``$``: no text around the match."""
    if len(top.branches) != 1 or not top.branches[0]:
        return False
    branch = top.branches[0]
    return branch[0].node == "^" and branch[-1].node == "$"


# -- the split repeat ----------------------------------------------------------------------


def _split_repeats(node: Alternation) -> None:
    for branch in node.branches:
        for item in branch:
            target = item.node
            if isinstance(target, Alternation):
                _split_repeats(target)
            if not _UNBOUNDED.match(item.quantifier):
                continue
            if isinstance(target, Atom):
                members, body = target.members, _class_body(target)
            elif isinstance(target, Alternation) and target.all_single():
                members = target.merged()
                body = "".join(_class_body(a) for a in target.singles())
            else:
                continue
            if members is not None and unsafe(members):
                rest = Atom(f"[{body}--\\x00]", members - {0})
                nul = Atom("\\x00", frozenset({0}))
                item.node = Alternation("(?:", [[Item(rest, "+")], [Item(nul)]])


def _class_body(atom: Atom) -> str:
    """The atom as a member of a bracket class."""
    if atom.text.startswith("["):
        return atom.text
    if len(atom.text) == 1 and atom.text in "[]\\^-&~":
        return "\\" + atom.text
    return atom.text


def _class_char(code: int) -> str:
    return f"\\x{code:02x}"


# -- parsing and rendering -----------------------------------------------------------------


class _Unreadable(Exception):
    pass


def parse(pattern: str) -> Alternation:
    """A syntax tree of ``pattern`` (llguidance's regex syntax) fine enough to find and rewrite
    character sets; raises ``_Unreadable`` for what it does not follow (inline flags)."""
    top = Alternation("")
    stack = [top]
    i = 0
    while i < len(pattern):
        c = pattern[i]
        current = stack[-1].branches[-1]
        if c == "[":
            end = _class_end(pattern, i)
            current.append(Item(_atom(pattern[i:end])))
            i = end
        elif c == "\\":
            end = _escape_end(pattern, i)
            text = pattern[i:end]
            current.append(Item(text if text[1] in _ZERO_WIDTH else _atom(text)))
            i = end
        elif c == "(":
            end = _group_head_end(pattern, i)
            if pattern[end - 1] == ")":  # (?i): no letter it changes is probed
                current.append(Item(pattern[i:end]))
                i = end
                continue
            group = Alternation(pattern[i:end])
            current.append(Item(group))
            stack.append(group)
            i = end
        elif c == ")" and len(stack) > 1:
            stack.pop()
            i += 1
        elif c == "|":
            stack[-1].branches.append([])
            i += 1
        elif c in "*+?{" and current and not (c == "{" and not _is_counted(pattern, i)):
            end = _quantifier_end(pattern, i)
            current[-1].quantifier += pattern[i:end]
            i = end
        elif c in "^$":
            current.append(Item(c))
            i += 1
        else:
            current.append(Item(_atom(c)))
            i += 1
    if len(stack) != 1:
        raise _Unreadable
    return top


def render(node: Alternation) -> str:
    body = "|".join("".join(_render_item(i) for i in b) for b in node.branches)
    return f"{node.opening}{body}{')' if node.opening else ''}"


def _render_item(item: Item) -> str:
    node = item.node
    text = node if isinstance(node, str) else node.text if isinstance(node, Atom) else render(node)
    return text + item.quantifier


def _plain(quantifier: str) -> bool:
    return quantifier in ("", "{1}", "{1,1}")


def _atom(text: str) -> Atom:
    literal = len(text) == 1 and text != "."
    if literal or (len(text) == 2 and text[0] == "\\" and not text[1].isalnum()):
        return Atom(text, frozenset({ord(text[-1])}) & _PROBE_SET)  # a literal character
    probe = _BRACED_HEX.sub(lambda m: f"\\U{int(m.group(1), 16):08x}", text)
    # Python's re reads a plain class as Rust does (and is faster); nested classes, set
    # operations and Unicode properties need the regex module's V1 syntax
    body = probe[1:] if probe.startswith("[") else probe  # a class's own opening bracket aside
    nested = _NESTED.search(body) is not None
    try:
        found = (
            regex.findall(probe, _PROBE_TEXT, flags=regex.V1)
            if nested
            else re.findall(probe, _PROBE_TEXT)
        )
    except (regex.error, re.error):
        return Atom(text)
    return Atom(text, frozenset(ord(c) for c in found if len(c) == 1))


def _class_end(pattern: str, i: int) -> int:
    """Index past the bracket class opening at ``i`` (nested classes as Rust reads them)."""
    depth = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            if depth and pattern.startswith("[:", i) and ":]" in pattern[i:]:
                i = pattern.index(":]", i) + 2
                continue
            depth += 1
            i += 1
            i += pattern[i : i + 1] == "^"
            i += pattern[i : i + 1] == "]"  # a leading "]" is a literal
            continue
        if c == "]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise _Unreadable


def _escape_end(pattern: str, i: int) -> int:
    if i + 1 >= len(pattern):
        raise _Unreadable
    letter = pattern[i + 1]
    if letter in "pPxuU" and pattern[i + 2 : i + 3] == "{":
        return pattern.index("}", i) + 1
    widths = {"x": 2, "u": 4, "U": 8, "p": 1, "P": 1}
    return i + 2 + widths.get(letter, 0)


def _group_head_end(pattern: str, i: int) -> int:
    if not pattern.startswith("(?", i):
        return i + 1
    if pattern.startswith("(?:", i):
        return i + 3
    if pattern.startswith(("(?P<", "(?<"), i):
        return pattern.index(">", i) + 1
    flags = _FLAGS.match(pattern, i)
    if flags is None or "x" in flags.group(1):
        raise _Unreadable  # (?x) would change how the rest reads
    return flags.end()


def _is_counted(pattern: str, i: int) -> bool:
    return re.match(r"\{\d+(?:,\d*)?\}", pattern[i:]) is not None


def _quantifier_end(pattern: str, i: int) -> int:
    end = pattern.index("}", i) + 1 if pattern[i] == "{" else i + 1
    return end + (pattern[end : end + 1] == "?")
