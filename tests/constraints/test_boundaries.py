"""stencil.constraints is pure CPU and imports nothing from engine, api or kernels."""

from __future__ import annotations

import ast
from pathlib import Path

import stencil.constraints as constraints


def test_constraints_import_no_other_stencil_component():
    """Static check (importing ``stencil`` itself pulls in the engine)."""
    root = Path(constraints.__file__).parent
    forbidden = ("stencil.engine", "stencil.api", "stencil.kernels")
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = [_absolute(path, root, node)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                assert not name.startswith(forbidden), f"{path}: imports {name}"


def _absolute(path: Path, root: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = ["stencil", "constraints", *path.parent.relative_to(root).parts]
    base = package[: len(package) - node.level + 1]
    return ".".join([*base, node.module or ""])


def test_public_names():
    import stencil.constraints as c

    for name in [
        "Constraint",
        "ConstraintCompiler",
        "CompiledConstraint",
        "Matcher",
        "TokenVocab",
        "allocate_token_bitmask",
        "bitmask_to_bool",
        "ConstraintError",
        "InvalidSchemaError",
        "UnsupportedSchemaError",
        "InvalidRegexError",
        "InvalidGrammarError",
        "ConstraintTooLargeError",
        "CompileTimeoutError",
    ]:
        assert hasattr(c, name), name
