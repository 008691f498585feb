"""How outputs space their JSON (``{"a":"x"}``, ``{"a": "x"}``, ``{\\n  "a": "x"\\n}``).

A JSON constraint may let the model write whitespace between tokens of structure; the drafters
draft structure (the text before the next key, what the constraint forces after a key) and
would draft it compact where the model spaces it. ``Spacing`` reads each output as it is written
and records its runs of structure: the punctuation and whitespace between two strings, numbers
or literals, outside strings (``",\\n  "`` holds the run ``,\\n  ``), each under its compact
form (``,``) and the nesting depth where it starts (pretty-printed JSON indents by depth): the
latest one of this output (``Spaced.runs``, one per sequence) and, for a run this output has
not written yet, its first occurrence in the latest output that wrote it (``first``, shared by
all sequences); where no output wrote a run at that depth, the latest at any depth. Nothing
here knows a tokenizer, a model or an indentation; the drafts are proposals (the verifier
decides), written compact where no output has spaced."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

STRUCTURE = frozenset(",:{}[] \t\n\r")  # what a run of structure is made of
OPEN, CLOSE = frozenset("{["), frozenset("}]")
BLANK = re.compile(r"\s+")
MAX_RUN = 64  # longer runs are not recorded (no indentation is that deep)
MAX_FIRST = 4096  # runs kept across outputs (cleared when it grows past)

Key = tuple[str, int | None]  # a run's compact form, the depth where it starts (None: any)


@dataclass(slots=True)
class Spaced:
    """One output's spacing: its runs (``Key`` -> as written last) and where its reading
    stands: the run being written and the depth where it started, the depth now, inside a
    string or not, the last character read."""

    runs: dict[Key, str] = field(default_factory=dict)
    run: str = ""
    start: int = 0
    depth: int = 0
    in_string: bool = False
    escaped: bool = False
    last: str = ""

    def value_open(self) -> bool:
        """Whether the reading stands in a value that may go on (a string, a number)."""
        return self.in_string or (not self.run and self.last not in '"}]')


def compact(run: str) -> str:
    """``run`` without its whitespace."""
    return BLANK.sub("", run)


class Spacing:
    def __init__(self) -> None:
        self.first: dict[Key, str] = {}  # a run where an output first wrote it
        self.spaces = False  # whether an output has written a run with whitespace

    def update(self, spaced: Spaced, text: str, record: bool = True) -> None:
        """Read ``text``, what the output wrote since the last update, recording each run of
        structure it ends (a run ends where a string, a number or a literal starts) where
        ``record``."""
        if len(self.first) >= MAX_FIRST:
            self.first.clear()
        for ch in text:
            spaced.last = ch
            if spaced.in_string:
                if spaced.escaped:
                    spaced.escaped = False
                elif ch == "\\":
                    spaced.escaped = True
                elif ch == '"':
                    spaced.in_string = False
            elif ch in STRUCTURE:
                if not spaced.run:
                    spaced.start = spaced.depth
                spaced.run += ch
                spaced.depth += (ch in OPEN) - (ch in CLOSE)
            else:
                if record:
                    self._record(spaced)
                spaced.run = ""
                spaced.in_string = ch == '"'

    def end(self, spaced: Spaced, text: str) -> None:
        """Read ``text``, the end of a finished output, recording its last run (``"\n}"``)."""
        self.update(spaced, text)
        self._record(spaced)
        spaced.run = ""

    def read(self, spaced: Spaced, text: str) -> Spaced:
        """Where the reading of ``spaced`` stands after ``text`` (drafts: nothing recorded)."""
        ahead = dataclasses.replace(spaced)
        self.update(ahead, text, record=False)
        return ahead

    def _record(self, spaced: Spaced) -> None:
        form = compact(spaced.run)
        if not form or len(spaced.run) > MAX_RUN:
            return
        for key in ((form, spaced.start), (form, None)):
            if key not in spaced.runs:
                self.first[key] = spaced.run
            spaced.runs[key] = spaced.run
        self.spaces |= spaced.run != form

    def rest(self, spaced: Spaced, form: str) -> str | None:
        """What follows the run ``spaced`` stands in ("" at a value's end) in the run whose
        compact form is the run's and then ``form``: as this output wrote it last at that
        depth, else as the latest output first did, else either at any depth; None where no
        output wrote that run, or where the run written so far does not start it."""
        written = spaced.run
        form = compact(written) + form
        depth = spaced.start if written else spaced.depth
        for key in ((form, depth), (form, None)):
            run = spaced.runs.get(key, self.first.get(key))
            if run is not None:
                return run[len(written) :] if run.startswith(written) else None
        return None
