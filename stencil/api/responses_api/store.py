"""Stored responses for ``previous_response_id`` and ``GET``/``DELETE /v1/responses/{id}``: in
memory, bounded by count and by bytes, least recently used evicted first, and scoped to the API
key that created them (another key's lookup finds nothing, as for an unknown id)."""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any


@dataclass(slots=True, frozen=True)
class Stored:
    response: dict[str, Any]
    conversation: list[dict[str, Any]]  # chat messages: input so far + this response's output
    size: int  # bytes of both as JSON


def key_scope(authorization: str | None) -> str:
    """The store's scope for a request: a digest of its bearer token (never the token)."""
    return hashlib.sha256((authorization or "").encode("utf-8", "replace")).hexdigest()


class ResponseStore:
    """LRU over (scope, id); ``max_bytes`` counts each entry's JSON size."""

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.bytes = 0
        self.evictions = 0
        self._entries: OrderedDict[tuple[str, str], Stored] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def metrics(self) -> dict[str, float]:
        """Gauges and a counter for ``/metrics`` (named as ``api.metrics`` lists them)."""
        return {
            "stored_responses": len(self._entries),
            "stored_response_bytes": self.bytes,
            "stored_response_evictions_total": self.evictions,
        }

    def put(self, scope: str, response: dict[str, Any], conversation: list[dict[str, Any]]) -> bool:
        """Keep ``response`` (evicting the least recently used); False when it alone is larger
        than the whole budget (it is then not kept)."""
        size = len(json.dumps([response, conversation], ensure_ascii=False).encode())
        if size > self.max_bytes or self.max_entries == 0:
            return False
        self.delete(scope, response["id"])
        self._entries[(scope, response["id"])] = Stored(response, conversation, size)
        self.bytes += size
        while len(self._entries) > self.max_entries or self.bytes > self.max_bytes:
            _, old = self._entries.popitem(last=False)
            self.bytes -= old.size
            self.evictions += 1
        return True

    def get(self, scope: str, response_id: str) -> Stored | None:
        entry = self._entries.get((scope, response_id))
        if entry is not None:
            self._entries.move_to_end((scope, response_id))
        return entry

    def delete(self, scope: str, response_id: str) -> bool:
        entry = self._entries.pop((scope, response_id), None)
        if entry is None:
            return False
        self.bytes -= entry.size
        return True
