"""The hook through which a caller lends the drafter what it knows about one request: an object
with ``propose(output, max_chars)``, set on ``SamplingParams.proposer``.

The engine drafts from what any request has (prompt lookup, the constraint's forced text, a
JSON schema's next key); what a request's source says (a document's labels, a table's next row)
is the caller's knowledge, and the engine holds no rules about it. ``stencil extract`` lends a
``DocumentProposer`` (``stencil/extract/document_proposer.py``) reading its document's index.
The drafter asks the proposer at each guided draft point, tokenizes each ``Proposal``'s text
(at most ``k`` tokens), and drafts it where the matcher accepts it and its chance pays
(``chance.py``); the verifier decides. A proposer that raises is dropped for its request (a
warning is logged) and drafting goes on without it."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

_VALUE_START = re.compile(r'"((?:[^"\\\n]|\\.)+)":\s*"?$')  # a key, then its value opens


@dataclass(frozen=True, slots=True)
class Proposal:
    """A text the output may continue with, and how far to trust it: ``first``, the chance its
    first token is what the model writes; ``rest``, each later token's given the one before.
    ``lead``: tried before prompt lookup (a guess that lookup gets wrong, such as the next row
    of a table, where lookup proposes the previous row's value again)."""

    text: str
    first: float
    rest: float
    lead: bool = False


@runtime_checkable
class Proposer(Protocol):
    def propose(self, output: str, max_chars: int) -> Sequence[Proposal]:
        """Proposals for what follows ``output`` (the request's output text so far), each at
        most ``max_chars`` characters, best first; ``[]`` where it knows nothing."""
        ...


def value_key(tail: str) -> str | None:
    """The key whose value a JSON output's ``tail`` ends by opening (``"key":``, ``"key":"``
    or ``"key": "``), or None: where a proposer of values has something to say."""
    found = _VALUE_START.search(tail)
    return found.group(1) if found else None
