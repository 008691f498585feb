"""A non-editable install works: the wheel built from this tree, installed into a fresh virtual
environment, runs ``stencil generate``, ``stencil extract --schema invoice`` and ``stencil serve``
from a folder outside the source tree (the schema library and the playground's page are package
data, not the source tree's).

The new venv sees this environment's site-packages through a ``.pth`` line, so the dependencies
are not downloaded again; ``.ci/run``'s own fresh venv is what proves they are all declared."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TIMEOUT = 300


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory) -> dict[str, Path]:
    import stencil

    model_dir = stencil.default_model_path()  # fetched + converted once into the shared cache
    root = tmp_path_factory.mktemp("wheel")
    dist = root / "dist"
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(dist),
            str(REPO),
        ],
        cwd=root,
    )
    wheels = list(dist.glob("stencil_serve-*.whl"))
    assert len(wheels) == 1, wheels
    env_dir = root / "venv"
    venv.create(env_dir)  # no pip of its own (ensurepip: 7 s): this pip installs into it
    py = env_dir / "bin" / "python"
    site = _run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=root
    ).strip()
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(site) / "_stencil_test_deps.pth").write_text("\n".join(sorted(deps)) + "\n")
    _run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps",
         "--no-index", str(wheels[0])],
        cwd=root,
        env=_without_source(),  # a source tree on PYTHONPATH would pass for the installed wheel
    )  # fmt: skip
    work = root / "elsewhere"
    work.mkdir()
    return {"bin": env_dir / "bin", "work": work, "site": Path(site), "model": model_dir}


def _run(cmd: list[str], cwd: Path, **kw) -> str:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT, **kw)
    assert proc.returncode == 0, f"{cmd} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _without_source() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "STENCIL_SCHEMAS_DIR")}


def _env(wheel_env) -> dict[str, str]:
    env = _without_source()
    env["PATH"] = f"{wheel_env['bin']}{os.pathsep}{env.get('PATH', '')}"
    return env


def test_the_installed_package_is_the_wheel(wheel_env):
    out = _run(
        [str(wheel_env["bin"] / "python"), "-c", "import stencil; print(stencil.__file__)"],
        cwd=wheel_env["work"],
        env=_env(wheel_env),
    )
    assert Path(out.strip()).is_relative_to(wheel_env["site"]), out
    # test support stays in the source tree
    assert not (wheel_env["site"] / "stencil" / "testing").exists()


def test_generate_with_a_library_schema(wheel_env):
    out = _run(
        [
            str(wheel_env["bin"] / "stencil"),
            "generate",
            "--json-schema",
            "person",
            "--max-tokens",
            "48",
            "--num-threads",
            "1",
            "Extract the person: Ada Lovelace was 36 years old.",
        ],
        cwd=wheel_env["work"],
        env=_env(wheel_env),
    )
    person = json.loads(out)
    assert isinstance(person, dict) and "name" in person


def test_extract_with_the_invoice_schema(wheel_env):
    doc = wheel_env["work"] / "invoice.txt"
    doc.write_text((REPO / "examples" / "invoice.txt").read_text())
    out = wheel_env["work"] / "out.jsonl"
    _run(
        [
            str(wheel_env["bin"] / "stencil"),
            "extract",
            "--schema",
            "invoice",
            str(doc),
            "--out",
            str(out),
            "--max-tokens",
            "96",
            "--num-threads",
            "1",
        ],
        cwd=wheel_env["work"],
        env=_env(wheel_env),
    )
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 1 and records[0]["file"].endswith("invoice.txt"), records


def test_serve_answers_from_the_wheel(wheel_env):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [
            str(wheel_env["bin"] / "stencil"),
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--num-threads",
            "1",
        ],
        cwd=wheel_env["work"],
        env=_env(wheel_env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        models = _poll(f"http://127.0.0.1:{port}/v1/models", proc)
        assert models["data"][0]["id"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/playground/app.js") as r:
            assert b"streamChat" in r.read()  # the playground's files are package data
    finally:
        proc.terminate()
        assert proc.wait(timeout=60) == 0, proc.stderr.read()


def _poll(url: str, proc: subprocess.Popen) -> dict:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"stencil serve exited {proc.returncode}: {proc.stderr.read()}")
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                return json.loads(r.read())
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"stencil serve did not answer {url} within {TIMEOUT} s")
