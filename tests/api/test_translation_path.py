"""One translation path: a schema sent through ``LLM.chat`` (Python) and through the server
(``response_format``) is translated by ``stencil.constraints.translate`` in a compile worker
process of the engine, and both translations are the same; nothing else in ``stencil`` calls
the translators."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest

from stencil import LLM, SamplingParams
from stencil.constraints import Constraint, translate

ROOT = Path(__file__).resolve().parents[2] / "stencil"
SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}
MESSAGES = [{"role": "user", "content": "Ada Lovelace was 36. Reply in JSON."}]
# the translators, and the only modules that may call them
TRANSLATORS = {"prepare", "grounded_lark", "mark_grounded", "regex_grammar", "choice_grammar",
               "lark_grammar", "validated_lark"}  # fmt: skip
CALLERS = {  # (the CLI's generate and extract check a constraint before any model loads)
    "translate": {
        "constraints/compiler.py",
        "constraints/isolation/worker.py",
        "cli.py",
        "extract/command.py",
    },
    **dict.fromkeys(TRANSLATORS, {"constraints/translation.py"}),
}


def _compiled(engine, constraint: Constraint):
    compiler = engine.guided.compiler
    compiled = compiler.cache.get(f"{compiler.vocab.fingerprint}|{constraint.key}")
    assert compiled is not None, "the request's compile is not in the engine's cache"
    return compiled, compiler


def test_python_and_server_translate_in_a_compile_worker(live_server):
    constraint = Constraint.json_schema(SCHEMA)
    llm = LLM(num_threads=1, seed=0, kv_cache_memory=64 << 20)
    try:
        params = SamplingParams(max_tokens=48, temperature=0, constraint=constraint)
        python_text = llm.chat(MESSAGES, params, use_tqdm=False)[0].outputs[0].text
        reply = live_server.openai().chat.completions.create(
            model=live_server.model,
            messages=MESSAGES,
            max_tokens=48,
            temperature=0,
            response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}},
        )
        server_text = reply.choices[0].message.content
        python, python_compiler = _compiled(llm.engine, constraint)
        server, server_compiler = _compiled(live_server.engine.engine, constraint)
        for compiled, compiler in ((python, python_compiler), (server, server_compiler)):
            assert compiled.translated_in != os.getpid()  # not in the caller's process
            assert compiled.translated_in in compiler.pool.pids()  # in its compile worker
        assert python.translation == server.translation == translate(constraint)
    finally:
        llm.engine.shutdown()
    for text in (python_text, server_text):  # both decoded under it
        assert set(json.loads(text)) == {"name", "age"}


def _calls(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            f = node.func
            names.add(f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", ""))
    return names


@pytest.mark.parametrize("function", sorted(CALLERS))
def test_only_the_compile_translates(function):
    """``translate`` is called by the compiler (its thread) and the compile worker alone, and the
    translators only by ``translate`` (their own packages aside)."""
    callers = set()
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        inside = rel.startswith(
            ("constraints/json_schema/", "constraints/grounding/", "constraints/llg/")
        )
        if function in _calls(path) and not (function in TRANSLATORS and inside):
            callers.add(rel)
    assert callers == CALLERS[function]
