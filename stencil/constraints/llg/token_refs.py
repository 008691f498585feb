"""Token references in a Lark grammar (``<[id]>``) and the tokens they may name.

llguidance rolls a matcher back by the byte length of each undone token, but a token matched as
``<[id]>`` advanced its parser by the reference's own bytes (its 0xFF marker and ``[id]``).
For a special token the two agree; for a plain token (a regular one, or an added token that is
not special, such as Phi-4-mini's ``functools`` where it is one) they do not, and undoing it
(speculative drafts, the close search at ``max_tokens``) fails with "rollback: too many bytes"
or, shorter than the reference, leaves the parser mid-token. So a grammar may name only
special tokens; a plain token's text is written as a string literal instead (same language).
"""

from __future__ import annotations

import json
import re

from ..errors import InvalidGrammarError
from ..vocab import TokenVocab

# string literals and regexes first, so that a "<[1]>" inside them is not read as a reference
_LEXEMES = re.compile(r'"(?:\\.|[^"\\\n])*"|/(?:\\.|[^/\\\n])+/|<\[(\d+)\]>')


def token_refs(lark: str) -> list[int]:
    """The token ids a Lark grammar names one at a time (``<[id]>``), in order of mention."""
    ids = (m.group(1) for m in _LEXEMES.finditer(lark) if m.group(1) is not None)
    return list(dict.fromkeys(int(i) for i in ids))


def check_token_refs(lark: str, vocab: TokenVocab) -> None:
    """Raise ``InvalidGrammarError`` when ``lark`` names a token that is not special."""
    for token_id in token_refs(lark):
        if 0 <= token_id < vocab.tokenizer_size and not vocab.is_special(token_id):
            text = vocab.token_bytes(token_id).decode(errors="replace")
            raise InvalidGrammarError(
                f"invalid grammar: <[{token_id}]> names token {token_id} ({text!r}), which is "
                "not a special token of this tokenizer, and a matcher cannot undo a plain "
                f"token matched that way; write its text as a string literal, {json.dumps(text)}"
            )
