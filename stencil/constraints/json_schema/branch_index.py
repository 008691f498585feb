"""Which pairs of ``oneOf`` branches still need a pairwise disjointness proof.

Two branches are disjoint when, in every JSON type both admit, something tells them apart:
their finite values (``const`` / ``enum``), or, among objects, the values of a required
discriminator property that all of them constrain (OpenAPI-style tagged unions). Hashing
the branches of each type by those values leaves only the pairs that share a value: time
linear in the branches and their values where the values are distinct, instead of one
proof per pair. Everything here over-approximates what a branch admits, so a pair left out
is disjoint; a pair kept may still be (the caller proves it).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

Group = tuple[int, ...]  # indices of branches that may overlap


@dataclass(frozen=True, slots=True)
class BranchFacts:
    """What the index reads of one branch."""

    types: frozenset[str]
    """JSON types the branch may admit where the ``oneOf`` applies."""
    values: frozenset[str] | None
    """Canonical texts of the only values the branch admits; None when unbounded."""
    tags: Mapping[str, frozenset[str]]
    """Required properties whose value lies in a finite set (canonical texts): for objects."""


def candidate_groups(facts: list[BranchFacts]) -> list[Group]:
    """Groups of branch indices; two branches that share no group are disjoint."""
    kinds = [frozenset(_bucket(t) for t in f.types) for f in facts]
    groups: dict[Group, None] = {}  # ordered, without repeats (a branch of several types)
    for kind in sorted(frozenset().union(*kinds)):
        members = [i for i, k in enumerate(kinds) if kind in k]
        groups.update(dict.fromkeys(_split(kind, members, facts)))
    return list(groups)


def pair_count(groups: Iterable[Group]) -> int:
    return sum(len(g) * (len(g) - 1) // 2 for g in groups)


def pairs(groups: Iterable[Group]) -> Iterator[tuple[int, int]]:
    for group in groups:
        yield from itertools.combinations(group, 2)


def _bucket(json_type: str) -> str:
    """Integers are numbers: one bucket for both."""
    return "number" if json_type == "integer" else json_type


def _split(kind: str, members: list[int], facts: list[BranchFacts]) -> list[Group]:
    if len(members) < 2:
        return []
    if all(facts[i].values is not None for i in members):
        return _by_label(members, lambda i: facts[i].values or ())
    if kind == "object" and (key := _discriminator(members, facts)) is not None:
        return _by_label(members, lambda i: facts[i].tags[key])
    return [tuple(members)]


def _discriminator(members: list[int], facts: list[BranchFacts]) -> str | None:
    """The property every member tags that leaves the fewest pairs, or None."""
    shared = set(facts[members[0]].tags).intersection(*(facts[i].tags for i in members[1:]))
    if not shared:
        return None

    def left(key: str) -> int:
        return pair_count(_by_label(members, lambda i: facts[i].tags[key]))

    return min(sorted(shared), key=left)


def _by_label(members: list[int], labels: Callable[[int], Iterable[str]]) -> list[Group]:
    """Members sharing a label, per label (groups of one dropped)."""
    buckets: dict[str, list[int]] = {}
    for i in members:
        for label in labels(i):
            buckets.setdefault(label, []).append(i)
    return [tuple(b) for b in buckets.values() if len(b) > 1]
