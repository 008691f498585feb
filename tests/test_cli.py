"""The ``stencil`` console script: parser, generated engine flags, the extract hook."""

from __future__ import annotations

import dataclasses
import json

import pytest

from stencil import cli
from stencil.engine.config import EngineConfig
from stencil.testing.tiny_models import TEST_KV_BYTES


def test_engine_flags_are_generated_from_engine_config():
    parser = cli.build_parser()
    args = parser.parse_args(
        [
            "serve",
            "--max-model-len",
            "512",
            "--no-enable-prefix-caching",
            "--kv-cache-memory",
            "1000000",
            "--dtype",
            "float32",
        ]
    )
    config = cli.engine_config(args)
    assert config.max_model_len == 512 and config.enable_prefix_caching is False
    assert config.kv_cache_memory == 1_000_000 and config.dtype == "float32"
    assert config.block_size == EngineConfig().block_size  # untouched fields keep defaults
    help_text = parser._subparsers._group_actions[0].choices["serve"].format_help()
    for f in dataclasses.fields(EngineConfig):
        assert "--" + f.name.replace("_", "-") in help_text


def test_serve_defaults():
    args = cli.build_parser().parse_args(["serve"])
    config = cli.server_config(args)  # flags not given: the ServerConfig defaults
    assert (config.host, config.port, config.api_key, config.served_model_name) == (
        "127.0.0.1",
        8000,
        None,
        None,
    )
    assert cli.engine_kwargs(args) == {}


def test_generate_flags_are_exclusive():
    parser = cli.build_parser()
    args = parser.parse_args(["generate", "hi", "--regex", "[a-z]+", "--max-tokens", "4"])
    assert args.regex == "[a-z]+" and args.max_tokens == 4
    with pytest.raises(SystemExit):
        parser.parse_args(["generate", "hi", "--regex", "a", "--choice", "a,b"])


def test_generate_rejects_a_bad_constraint_before_loading(capsys):
    assert cli.main(["generate", "hi", "--regex", "(("]) == 2
    assert "regex" in capsys.readouterr().err


def test_bad_engine_config_exits_2(capsys):
    assert cli.main(["generate", "hi", "--dtype", "int3"]) == 2
    assert "dtype" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["generate", "serve", "extract"])
def test_bad_speculative_config_exits_2(command, capsys, tmp_path):
    (tmp_path / "a.txt").write_text("Ada Lovelace, 36.")
    extract = ["extract", "--schema", "person", "--out", str(tmp_path / "r.jsonl")]
    extract.append(str(tmp_path / "a.txt"))
    args = {"generate": ["generate", "hi"], "serve": ["serve"], "extract": extract}
    spec = '{"method": "ngram", "num_speculative_tokens": -1}'
    assert cli.main([*args[command], "--speculative-config", spec]) == 2
    assert "speculative_config.num_speculative_tokens" in capsys.readouterr().err


# the flag's path is one for both methods: the draft model in the default run, n-gram in -m slow
@pytest.mark.parametrize("method", [pytest.param("ngram", marks=pytest.mark.slow), "draft_model"])
def test_generate_with_speculative_config(capsys, method):
    from stencil.engine.models.default_model import default_model_file

    spec = {"ngram": {"prompt_lookup_max": 2}, "draft_model": {"model": str(default_model_file())}}
    spec = json.dumps({"method": method, "num_speculative_tokens": 3, **spec[method]})
    argv = ["generate", "Say yes or no.", "--choice", "yes,no", "--speculative-config", spec]
    assert cli.main([*argv, "--max-tokens", "4", "--kv-cache-memory", str(TEST_KV_BYTES)]) == 0
    assert capsys.readouterr().out.strip() in ("yes", "no")


def test_generate_with_a_missing_draft_model_exits_2(capsys, tmp_path):
    spec = json.dumps({"method": "draft_model", "model": str(tmp_path / "none.gguf")})
    assert cli.main(["generate", "hi", "--speculative-config", spec]) == 2
    assert "speculative_config.model" in capsys.readouterr().err


def test_extract_hook(monkeypatch, capsys):
    monkeypatch.setattr(cli, "_extract_module", lambda: None)
    assert cli.main(["extract"]) == 2
    assert "stencil.extract.command" in capsys.readouterr().err


def test_generate_runs_the_offline_engine(capsys):
    assert (
        cli.main(
            [
                "generate",
                "Is the sky blue? Answer yes or no.",
                "--choice",
                "yes,no",
                "--max-tokens",
                "4",
                "--kv-cache-memory",
                str(TEST_KV_BYTES),
            ]
        )
        == 0
    )
    assert capsys.readouterr().out.strip() in ("yes", "no")


def test_serve_exits_1_when_the_model_cannot_load():
    import subprocess
    import sys

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "stencil.cli",
            "serve",
            "--model",
            "/nonexistent/model",
            "--port",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    assert "failed to load" in proc.stderr


def test_extract_arguments_load_lazily():
    import subprocess
    import sys

    code = (
        "import sys; from stencil import cli; cli.build_parser().parse_args(['serve']); "
        "print('stencil.extract.command' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


def test_server_flags_are_generated_from_server_config():
    from stencil.api.state import ServerConfig

    parser = cli.build_parser()
    args = parser.parse_args(
        ["serve", "--shutdown-timeout", "0", "--max-headers", "5", "--max-header-bytes", "999"]
    )
    config = cli.server_config(args)
    assert (config.shutdown_timeout, config.max_headers, config.max_header_bytes) == (0.0, 5, 999)
    assert config.max_body_bytes == ServerConfig().max_body_bytes
    help_text = parser._subparsers._group_actions[0].choices["serve"].format_help()
    for f in dataclasses.fields(ServerConfig):
        if f.name != "log_level":
            assert "--" + f.name.replace("_", "-") in help_text


def test_bad_server_config_exits_2(capsys):
    assert cli.main(["serve", "--shutdown-timeout", "-1"]) == 2
    assert "shutdown_timeout" in capsys.readouterr().err


def test_generate_names_a_missing_schema(capsys):
    assert cli.main(["generate", "hi", "--json-schema", "no-such-schema"]) == 2
    err = capsys.readouterr().err
    assert "no-such-schema" in err and "person" in err  # the library's names are listed
