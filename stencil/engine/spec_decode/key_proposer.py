"""Drafts at a JSON object's key choice points: the schema's next declared property name.

The model nearly always writes a schema's properties in their declared order (and llguidance
keeps that order), so where the grammar lets the output write a property name, the first
declared property after the last key written whose ``name":`` the matcher accepts is the guess.
That point is right after a key's opening quote, or where the value just written may end: then
the guess is written with what closes the value first (``","name``, ``,"name``, ``"},{"name``:
the next key, or the next array item's first key), or after an object's ``{`` with its quote
(``"name``): spaced as the output spaced that closer before (``",\n  "name``; ``spacing.py``),
else compact, and spelled as the output spelled it before (``spelling.py``). A wrong guess
costs its rows; the verifier decides."""

from __future__ import annotations

import json
import re
from typing import Any

from stencil.engine.spec_decode.proposer import value_key
from stencil.engine.spec_decode.spacing import Spaced, Spacing
from stencil.engine.spec_decode.text_tokens import TextTokens

CLOSERS = ("", '","', ',"', '{"', '"},{"', '},{"', '"}],"', '}],"', '"')  # before the next key
_LAST_KEY = re.compile(r'"((?:[^"\\\n]|\\.)+)":')
MAX_NAMES = 512  # property names kept per schema


class KeyProposer:
    def __init__(self, tokenizer: Any) -> None:
        self._tokens = TextTokens(tokenizer)
        vocab = tokenizer.get_vocab()
        # a closer the vocabulary holds whole is written as that token (``},{"``), which the
        # canonical tokenization of the text splits (``},`` ``{"``)
        self._closers = {
            c: [vocab[c]] if c in vocab else tokenizer.encode(c, add_special_tokens=False)
            for c in CLOSERS
        }

    def propose(
        self,
        matcher,
        names: tuple[str, ...],
        tail: str,
        spelled: dict[str, list[int]],
        spacing: Spacing | None = None,
        spaced: Spaced | None = None,
    ) -> list[int]:
        """Tokens of the next declared property name (with what closes the value before it)
        where ``matcher`` accepts ``name":`` next; [] where none fits. ``tail``: the text of
        the output's last tokens; ``spelled``: how the output split short texts before
        (``spelling.py``), which the closer follows; ``spacing``: how outputs spaced their
        JSON, ``spaced``: its reading at the tail's end (``spacing.py``), which the closer
        follows first."""
        if not names or value_key(tail) is not None:
            return []  # a value opens here (an empty string closed at once is no guess)
        keys = _LAST_KEY.findall(tail)
        start = names.index(keys[-1]) + 1 if keys and keys[-1] in names else 0
        order = names[start:] + names[:start]
        for head in self._heads(tail, spelled, spacing, spaced):
            if head and not fits(matcher, head):
                continue
            for name in order:
                if fits(matcher, head + self._tokens(f'{name}":')):
                    return head + self._tokens(name)
        return []

    def _heads(
        self,
        tail: str,
        spelled: dict[str, list[int]],
        spacing: Spacing | None,
        spaced: Spaced | None,
    ) -> list[list[int]]:
        """The tokens of each closer that may come before the next key: spaced as the output
        spaced it (the rest of the run the tail ends in), then compact."""
        heads = [[]] if tail.endswith('"') else []
        for closer in CLOSERS[1:]:
            core = closer.strip('"')
            rest = spacing.rest(spaced, core) if spacing and spacing.spaces else None
            lead = '"' if core and closer.startswith('"') else ""  # a string value's end
            text = None if rest is None else f'{lead}{rest}"'
            if text is not None and text != closer:
                heads.append(spelled.get(text) or self._tokens(text))
            heads.append(spelled.get(closer) or self._closers[closer])
        return heads


def property_names(constraint: Any) -> tuple[str, ...]:
    """A JSON-schema constraint's property names in declaration order, nested ones right after
    their parent (each once); () for other constraints."""
    if constraint is None or constraint.kind != "json":
        return ()
    try:
        schema = json.loads(constraint.source)
    except ValueError:
        return ()
    names: dict[str, None] = {}
    _walk(schema, names)
    return tuple(names)


def _walk(node: Any, names: dict[str, None]) -> None:
    if isinstance(node, list):
        for item in node:
            _walk(item, names)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                for name, sub in value.items():
                    if len(names) < MAX_NAMES and '"' not in name and "\\" not in name:
                        names.setdefault(name)
                    _walk(sub, names)
            elif key not in ("enum", "const", "default", "examples"):
                _walk(value, names)


def fits(matcher, tokens: list[int]) -> bool:
    """Whether ``matcher`` accepts ``tokens`` next (it is left where it was)."""
    n = 0
    for t in tokens:
        if not matcher.accept_token(t):
            break
        n += 1
    matcher.rollback(n)
    return n == len(tokens) and n > 0
