"""Drafts for a value's first tokens in a repeated structure: the document's next row.

An array of items extracted from a table (a receipt's lines, an invoice's line items) writes
one item per row, in the document's order. Where the output opens a value for a key it has
written before (``"price":`` in the next item), prompt lookup proposes the previous item's value
(the last ``"price":`` was followed by it), which the model almost never repeats. The previous
value is found in the document instead, and the text at the same column of the next line (up
to a run of two blanks or the line's end; none past a blank line, where a table ends) is
proposed."""

from __future__ import annotations

import re
from typing import Any

from stencil.engine.spec_decode.label_proposer import cell_below, value_key

CHARS_PER_TOKEN = 8  # text taken, per token wanted


class RowProposer:
    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def propose(self, document: str, output: str, k: int) -> list[int]:
        """Up to ``k`` tokens of the document's next row at the column of the previous value
        of the key whose value ``output`` (the output's text) opens; [] where the key has no
        earlier value, or it or a next row is not found."""
        key = value_key(output)
        if key is None or k <= 0:
            return []
        values = re.findall(rf'"{re.escape(key)}":"?([^",}}\]\n]+)', output)
        if not values:  # the key is new
            return []
        previous = values[-1].strip()
        at = document.rfind(previous) if previous else -1
        if at < 0:
            return []
        cell = cell_below(document, at)[1][: CHARS_PER_TOKEN * k]
        return self.tokenizer.encode(cell, add_special_tokens=False)[:k] if cell else []
