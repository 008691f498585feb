"""Every import arrow of the package, read from the source with ``ast`` (lazy imports included):

    cli -> playground -> {api, extract} -> engine -> {constraints, kernels}

``extract`` uses only the public engine API (and the server over HTTP); ``constraints`` and
``kernels`` import neither each other nor anything above them; the engine takes from
``constraints`` only the compiler, the value it compiles and the bitmask helpers; translation
and grounding import nothing of the compile stage; nothing imports ``stencil.testing``
(support for the tests and benchmarks) but itself; no two modules import each other in a cycle;
the engine imports no knowledge of documents (extract, the lexicon, the document index): a
request lends it through the proposer hook (``SamplingParams.proposer``).

In the server, the request path runs one way: HTTP -> conversion (request -> ``Plan``) -> engine
stream -> renderers. Conversion imports neither the output side nor the HTTP layer, the output
side (events, the tool parser, the renderers) imports no conversion, and ``api.state`` imports
no API above it (the Responses API's store is handed to it)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "stencil"

# area -> the areas it may import (its own always allowed)
ALLOWED = {
    "paths": set(),
    "constraints": {"paths"},
    "kernels": {"paths"},
    "engine": {"constraints", "kernels", "paths"},
    "api": {"engine", "constraints", "paths"},
    "extract": {"engine", "constraints", "root"},
    "root": {"engine", "constraints"},
    # the playground page: the server's routes plus stencil extract's prompt, library and readers
    "playground": {"api", "extract", "engine", "constraints", "root"},
    "cli": {"playground", "api", "extract", "engine", "constraints", "root"},
    "testing": {
        "playground",
        "api",
        "extract",
        "engine",
        "constraints",
        "kernels",
        "paths",
        "root",
        "cli",
    },
}
# what ``extract`` may use of the engine: the public API
PUBLIC_ENGINE = {
    "stencil",
    "stencil.constraints",
    "stencil.engine.config",
    "stencil.engine.errors",
    "stencil.engine.flags",
    "stencil.engine.llm",
    "stencil.engine.outputs",
    "stencil.engine.sampling_params",
    "stencil.engine.spec_decode.proposer",  # the proposer hook
}

# what the engine may take from ``constraints``: the compiler and its products (the matcher is
# reached through ``CompiledConstraint.new_matcher``), the value it compiles, the bitmask helpers
ENGINE_FROM_CONSTRAINTS = {
    "stencil.constraints": {
        "ConstraintCompiler", "TokenVocab", "Constraint", "ConstraintError",
        "allocate_token_bitmask", "bitmask_to_bool",
    },
    "stencil.constraints.spec": {"Constraint"},
}  # fmt: skip
# the translation stage and grounding: below the compiler, never above it
TRANSLATION = ("translation", "spec", "json_schema", "grounding", "llg")
COMPILE_STAGE = ("compiler", "isolation", "cache", "thread_runner", "checked_matcher")

# what documents say and how they label it: extract's rules, the lexicon and the index read through
# it. The engine drafts with this knowledge only through the proposer hook a request lends it
# (``SamplingParams.proposer``, ``engine/spec_decode/proposer.py``), never by importing it.
DOCUMENT_RULES = (
    "stencil.extract",
    "stencil.constraints.grounding.lexicon",
    "stencil.constraints.grounding.document_index",
    "stencil.constraints.grounding.stated",
)
DOCUMENT_RULE_NAMES = {
    "LEXICON",
    "Lexicon",
    "DocumentIndex",
    "Label",
    "without_label",
    "number_runs",
    "load_lexicon",
}

KNOWN_CYCLES: list[list[str]] = []

# the server's request path (``stencil.api.``), by side; the value types between the sides
# (``request_plan``, ``model_info``, ``errors``, ``openai.protocol``, ``tools.formats`` /
# ``schema`` / ``harmony``: the call syntax both sides read) belong to none
CONVERSION = {
    "openai.convert",
    "openai.surface",
    "openai.structured_output",
    "openai.constraint",
    "openai.chat_prompt",
    "openai.messages",
    "openai.chat_template",
    "openai.prompt_tokens",
    "openai.sampling",
    "tools.plan",
    "tools.constraint",
    "tools.prompt",
    "responses_api.convert",
}
OUTPUT = {
    "tools.parser",
    "tools.harmony_parser",
    "tools.calls",
    "output_events",
    "engine_stream",
    "chat_render",
    "responses_api.render",
    "responses_api.stream",
    "responses_api.reasoning",
}
HTTP = {
    "app",
    "routes",
    "read_request",
    "send_response",
    "state",
    "embeddings",
    "responses_api.routes",
    "responses_api.store",
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The stencil modules ``name`` imports (``from pkg import mod`` resolves to ``pkg.mod``)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "stencil"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            if target.split(".")[0] != "stencil":
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                out.add(sub if sub in MODULES else target)
    return out


def _area(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "root"
    return parts[1]


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def test_every_module_is_in_an_area() -> None:
    assert {_area(m) for m in MODULES} <= set(ALLOWED)


@pytest.mark.parametrize("area", sorted(ALLOWED))
def test_imports_follow_the_arrows(area: str) -> None:
    bad = [
        f"{m} -> {t}"
        for m, targets in GRAPH.items()
        if _area(m) == area
        for t in sorted(targets)
        if _area(t) != area and _area(t) not in ALLOWED[area]
    ]
    assert not bad, "imports against the layering:\n" + "\n".join(bad)


def test_extract_uses_only_the_public_engine_api() -> None:
    bad = [
        f"{m} -> {t}"
        for m, targets in GRAPH.items()
        if _area(m) == "extract"
        for t in sorted(targets)
        if _area(t) != "extract" and t not in PUBLIC_ENGINE
    ]
    assert not bad, "extract reaches past the public API:\n" + "\n".join(bad)


def test_engine_reaches_constraints_through_the_compiler_only() -> None:
    bad = []
    for name, path in MODULES.items():
        if _area(name) != "engine":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            module = getattr(node, "module", None) or ""
            if isinstance(node, ast.Import):
                bad += [f"{name}: import {a.name}" for a in node.names if "constraints" in a.name]
            elif isinstance(node, ast.ImportFrom) and module.startswith("stencil.constraints"):
                allowed = ENGINE_FROM_CONSTRAINTS.get(module, set())
                bad += [f"{name}: {module}.{a.name}" for a in node.names if a.name not in allowed]
    assert not bad, "the engine reaches into constraints:\n" + "\n".join(bad)


def test_the_engine_knows_documents_only_through_the_proposer_hook() -> None:
    """No engine module imports extract, the lexicon, the document index or the readers of
    stated values (a module or one of their names re-exported), nor opens the lexicon's data."""
    bad = []
    for name, path in MODULES.items():
        if _area(name) != "engine":
            continue
        source = path.read_text(encoding="utf-8")
        bad += [f"{name} reads lexicon.toml"] if "lexicon.toml" in source else []
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                modules, names = [a.name for a in node.names], []
            elif isinstance(node, ast.ImportFrom) and not node.level:
                modules, names = [node.module or ""], [a.name for a in node.names]
            else:
                continue
            targets = modules + [f"{m}.{n}" for m in modules for n in names]
            bad += [f"{name} -> {t}" for t in targets if _is_document_rule(t)]
            bad += [f"{name} -> {n}" for n in names if n in DOCUMENT_RULE_NAMES]
    relative = [
        f"{m} -> {t}"
        for m, targets in GRAPH.items()
        if _area(m) == "engine"
        for t in targets
        if _is_document_rule(t)
    ]
    assert not bad + relative, "the engine imports document rules:\n" + "\n".join(bad + relative)


def _is_document_rule(module: str) -> bool:
    return any(module == r or module.startswith(r + ".") for r in DOCUMENT_RULES)


@pytest.mark.parametrize("part", TRANSLATION)
def test_translation_and_grounding_sit_below_the_compiler(part: str) -> None:
    """They import nothing above ``constraints`` (no engine) and nothing of the compile stage."""
    prefix = f"stencil.constraints.{part}"
    bad = [
        f"{m} -> {t}"
        for m, targets in GRAPH.items()
        if m == prefix or m.startswith(prefix + ".")
        for t in sorted(targets)
        if _area(t) not in ("constraints", "paths")
        or t.split(".")[2:3]
        and t.split(".")[2] in COMPILE_STAGE
    ]
    assert not bad, "the translation stage reaches up:\n" + "\n".join(bad)


def test_no_import_cycles() -> None:
    """Tarjan's strongly connected components over module -> module imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH.get(v, ()):
            if w not in GRAPH or w == v or _is_package_of(w, v):
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in GRAPH:
        if v not in index:
            visit(v)
    cycles = [c for c in cycles if c not in KNOWN_CYCLES]
    assert not cycles, f"import cycles: {cycles}"


def _is_package_of(package: str, module: str) -> bool:
    """``pkg/__init__.py`` re-exporting its own modules is not a cycle."""
    return module.startswith(package + ".") and MODULES[package].name == "__init__.py"


def _api(names: set[str]) -> set[str]:
    return {f"stencil.api.{n}" for n in names}


@pytest.mark.parametrize(
    ("side", "modules", "forbidden"),
    [("conversion", CONVERSION, OUTPUT | HTTP), ("output", OUTPUT, CONVERSION | HTTP)],
)
def test_the_request_path_runs_one_way(side: str, modules: set[str], forbidden: set[str]) -> None:
    """Conversion hands plain values forward and never reaches the output side or HTTP; the
    output side (events, the tool parser, the renderers) reads the ``Plan`` and never converts."""
    assert _api(modules) <= MODULES.keys(), sorted(_api(modules) - MODULES.keys())
    bad = [f"{m} -> {t}" for m in sorted(_api(modules)) for t in sorted(GRAPH[m] & _api(forbidden))]
    assert not bad, f"the request path's {side} reaches back:\n" + "\n".join(bad)


def test_app_state_imports_no_api_above_it() -> None:
    """``AppState`` is handed what the APIs keep (the Responses API's store), never imports it."""
    allowed = _api({"metrics", "middleware.admission", "model_info", "engine_client"})
    above = [
        t
        for t in sorted(GRAPH["stencil.api.state"])
        if t.startswith("stencil.api.") and t not in allowed
    ]
    assert not above, f"api.state imports upward: {above}"


def test_the_graph_is_read() -> None:
    """Guards the reader itself: known arrows are found."""
    assert "stencil.api.app" in GRAPH["stencil.cli"]
    assert "stencil.extract.command" not in GRAPH["stencil.cli"]  # loaded by name, lazily
    assert "stencil.engine.llm" in GRAPH["stencil.extract.command"]
    assert "stencil.constraints.bitmask" in GRAPH["stencil.constraints"]


def test_tests_and_benchmarks_do_not_edit_sys_path() -> None:
    """Shared helpers live in ``stencil.testing``; nothing reaches across folders by path."""
    repo = ROOT.parent
    edits = ("sys.path.insert", "sys.path.append")
    offenders = [
        str(p.relative_to(repo))
        for folder in ("tests", "bench")
        for p in sorted((repo / folder).rglob("*.py"))
        if p.resolve() != Path(__file__).resolve()
        and any(e in p.read_text(encoding="utf-8") for e in edits)
    ]
    assert offenders == []
