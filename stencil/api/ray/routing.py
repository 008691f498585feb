"""Prefix-affinity routing for Ray Serve engine replicas (a Serve ``RequestRouter``).

Requests whose prompts start alike go to the same replica, so its prefix cache serves the shared
part (a system prompt, a schema, few-shot examples). Each replica's score for a request is a
hash of (prompt prefix, replica id): rendezvous hashing. The ranks are the replicas by score, so
a request goes to its best-scoring replica when that one has room (``max_ongoing_requests``) and
to the next one when not; when a replica leaves, only the prefixes it held move. Requests
without a prompt (``/v1/models``, ``/tokenize``...) go to the least loaded replica.

Loaded only inside Ray Serve (``stencil serve --replicas``); needs the ``ray`` extra.
"""

from __future__ import annotations

import hashlib

from ray.serve.request_router import FIFOMixin, PendingRequest, RequestRouter, RunningReplica


class PrefixAffinityRouter(FIFOMixin, RequestRouter):
    """Rendezvous hashing on ``args[0].prompt`` (a ``ForwardedRequest``), least-loaded without."""

    async def choose_replicas(
        self,
        candidate_replicas: list[RunningReplica],
        pending_request: PendingRequest | None = None,
    ) -> list[list[RunningReplica]]:
        prompt = _prompt(pending_request)
        if not prompt or len(candidate_replicas) < 2:
            return [list(candidate_replicas)]
        return [[r] for r in rank_replicas(prompt, candidate_replicas)]


def rank_replicas(prompt: str, replicas: list[RunningReplica]) -> list[RunningReplica]:
    """``replicas`` from the best to the worst home for ``prompt``."""
    return sorted(replicas, key=lambda r: score(prompt, r.replica_id.unique_id), reverse=True)


def score(prompt: str, replica_id: str) -> int:
    digest = hashlib.blake2b(f"{replica_id}\0{prompt}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def _prompt(pending_request: PendingRequest | None) -> str:
    if pending_request is None or not pending_request.args:
        return ""
    return str(getattr(pending_request.args[0], "prompt", "") or "")
