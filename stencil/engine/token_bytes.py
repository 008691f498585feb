"""A token's text and, where its text alone is not its bytes, its bytes (the OpenAI API's
``logprobs`` ``bytes``): a byte-level BPE token or a byte-fallback piece (``<0xF0>``) that ends
inside a character decodes to U+FFFD on its own, yet holds real bytes of the answer."""

from __future__ import annotations

import functools
import re
from typing import Any

_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def token_piece(tokenizer: Any, token_id: int) -> tuple[str, bytes | None]:
    """``(text, bytes)`` of one token: ``bytes`` None where they are ``text``'s UTF-8."""
    text = tokenizer.decode([token_id])
    if "\ufffd" not in text:
        return text, None
    piece = tokenizer.convert_ids_to_tokens(token_id) or ""
    if found := _BYTE_PIECE.fullmatch(piece):
        return text, bytes([int(found[1], 16)])
    decoder = _byte_decoder()
    if piece and all(c in decoder for c in piece):
        return text, bytes(decoder[c] for c in piece)
    return text, None


@functools.cache
def _byte_decoder() -> dict[str, int]:
    """Byte-level BPE's alphabet -> byte: GPT-2's stand-ins, the printable bytes as
    themselves and the other bytes, in order, as the characters from U+0100 on."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    others = [b for b in range(256) if b not in printable]
    return {chr(b): b for b in printable} | {chr(256 + i): b for i, b in enumerate(others)}
