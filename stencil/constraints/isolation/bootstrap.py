"""Entry point of a compile worker process: ``python bootstrap.py SOCKET_FD PARENT_PID``.

It imports only the constraints front end: ``stencil`` and ``stencil.constraints`` are registered
as bare packages, without running their ``__init__`` (which import the engine and torch: 1.4 s
and 200 MB per worker otherwise), nor jsonschema's eager parser build (``deferred_rfc3987``).
No relative imports: this file runs as a script.
"""

import sys
import types
from pathlib import Path


def main() -> None:
    here = Path(__file__).resolve().parent
    if sys.path and Path(sys.path[0] or ".").resolve() == here:
        sys.path.pop(0)  # the script's folder is not an import root
    for name, path in (("stencil", here.parents[1]), ("stencil.constraints", here.parent)):
        if name not in sys.modules:
            package = types.ModuleType(name)
            package.__path__ = [str(path)]
            sys.modules[name] = package
    import stencil.constraints.deferred_rfc3987  # noqa: F401 (before jsonschema loads)
    from stencil.constraints.isolation.worker import serve

    serve(int(sys.argv[1]), int(sys.argv[2]))


if __name__ == "__main__":
    main()
