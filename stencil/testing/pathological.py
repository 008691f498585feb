"""Valid but pathological constraints: compile work far beyond any budget, for the isolation tests
and benchmarks (a compile must be killed, never hang the engine)."""

from __future__ import annotations

from stencil.constraints import Constraint


def pathological(branches: int = 3000) -> Constraint:
    """~25 s of front-end work at 3,000 branches: pairwise ``oneOf`` disjointness of closed objects,
    each requiring a key of its own. Building the value costs nothing; its compile is the work."""
    schemas = [
        {
            "type": "object",
            "properties": {f"k{i}": {"type": "integer"}},
            "required": [f"k{i}"],
            "additionalProperties": False,
        }
        for i in range(branches)
    ]
    return Constraint.json_schema({"oneOf": schemas})
