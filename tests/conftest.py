"""Session fixtures shared across test folders."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def ray_address() -> Iterator[str]:
    """A real local Ray cluster (2 CPUs, head on 127.0.0.1), shared by the Ray tests of the server
    (tests/api/ray) and of ``stencil extract --ray`` (tests/extract); shut down (and its
    processes reaped) at the end of the session."""
    from stencil.testing.ray_cluster import local_cluster

    with local_cluster(num_cpus=2) as address:
        yield address
