"""Remove from a grammar mask the tokens that would complete a value a decode-time check
refuses. Only tokens that can complete a value at all are tried (see ``TokenTable``); tokens
closing a string are grouped by the string they make, so each string is checked once. The
work per mask is bounded: past ``MAX_FEEDS`` single-token tries or ``MAX_VALIDATED`` strings
validated with jsonschema, the remaining candidates are refused untried (never allowed
unchecked), shortest first kept, so a short closing token always stays available."""

from __future__ import annotations

import numpy as np

from .plan import SemanticPlan
from .tokens import TokenTable, ids_of
from .tracker import State, Tracker

MAX_FEEDS = 512
MAX_VALIDATED = 96


def refused_tokens(
    words: np.ndarray,
    state: State,
    history: bytes,
    tracker: Tracker,
    plan: SemanticPlan,
    table: TokenTable,
) -> list[int]:
    """Token ids allowed by ``words`` (a packed mask row) that must be refused now."""
    if state.in_value_string:
        return _string_end(words, state, history, tracker, plan, table)
    if state.in_string:  # a key, or just after a backslash: only a quote can complete
        candidates = words & table.words["live_quote"]
    elif state.in_number:
        candidates = words & table.words["closes_number"]
    elif state.in_literal:
        candidates = words  # a literal's last letters (the grammar allows a handful)
    else:
        candidates = words & table.words["closes_struct"]
    return _try_each(ids_of(candidates), state, history, tracker, table)


def _string_end(
    words: np.ndarray,
    state: State,
    history: bytes,
    tracker: Tracker,
    plan: SemanticPlan,
    table: TokenTable,
) -> list[int]:
    # a string with no check of its own, not an item of a checked-unique array: closing it
    # cannot be refused, whatever its text; only what a token adds after the quote can be
    parent = state.stack[-1] if state.stack else None
    if state.loc is None and (parent is None or parent.seen is None):
        live = ids_of(words & table.words["live_quote"])
        return _try_each(live, state, history, tracker, table)
    ids = ids_of(words & table.words["has_quote"])
    groups: dict[bytes, list[int]] = {}
    slow: list[int] = []
    for t in ids.tolist():
        data = table.bytes[t]
        if table.clean_quote[t]:
            groups.setdefault(data[: data.find(b'"')], []).append(t)
        else:
            slow.append(t)
    expensive = state.loc is not None and bool(state.loc.checked)
    budget = MAX_VALIDATED if expensive else len(groups)
    refused: list[int] = []
    rest: list[int] = []
    for i, content in enumerate(sorted(groups, key=len)):
        members = groups[content]
        if i >= budget or tracker.feed(state, content + b'"', history) is None:
            refused.extend(members)
        else:
            rest.extend(t for t in members if not table.inert_rest[t])
    refused.extend(_try_each(np.array(slow + rest, dtype=np.int64), state, history, tracker, table))
    return refused


def _try_each(
    ids: np.ndarray, state: State, history: bytes, tracker: Tracker, table: TokenTable
) -> list[int]:
    order = sorted(ids.tolist(), key=lambda t: len(table.bytes[t]))
    refused = order[MAX_FEEDS:]
    for t in order[:MAX_FEEDS]:
        if tracker.feed(state, table.bytes[t], history) is None:
            refused.append(t)
    return refused
