"""Session fixtures for the engine tests: tiny random-weight models of each supported architecture
(saved with ``save_pretrained``, SmolLM2's tokenizer copied in) and the HF reference models.
Everything is CPU, fp32, no network."""

from __future__ import annotations

from pathlib import Path

import pytest

from stencil.testing.tiny_models import ARCH_BUILDERS, build_tiny_models, hf_loader, make_llm


@pytest.fixture(scope="session")
def default_model_dir() -> Path:
    import stencil

    path = Path(stencil.default_model_path())
    if not (path / "config.json").is_file():
        pytest.skip("embedded default model not available")
    return path


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory, default_model_dir) -> dict[str, Path]:
    """name -> directory of a tiny random-weight model, for every architecture variant."""
    root = tmp_path_factory.mktemp("tiny_models")
    return build_tiny_models(ARCH_BUILDERS, root, default_model_dir)


@pytest.fixture(scope="session")
def hf_models(tiny_models):
    """Lazily loaded transformers reference models (fp32, eager attention)."""
    return hf_loader(tiny_models)


@pytest.fixture(scope="session")
def gguf_tokenizer_fields(default_model_dir) -> list:
    """The embedded GGUF file's tokenizer fields (``read_tokenizer_fields``), read once for every
    GGUF file the tests write: parsing its 49k-token vocabulary takes seconds."""
    from stencil.engine.models.default_model import _fetch_gguf
    from stencil.paths import cache_root
    from stencil.testing.gguf_writer import read_tokenizer_fields

    return read_tokenizer_fields(_fetch_gguf(cache_root() / "downloads"))


@pytest.fixture(scope="session")
def tokenizer(default_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(default_model_dir))


@pytest.fixture()
def fresh_tiny_llm(tiny_models):
    """A function-scoped engine (for tests that leave the engine in an odd state)."""

    def build(**kw):
        kw.setdefault("block_size", 4)
        kw.setdefault("num_kv_blocks", 64)
        return make_llm(tiny_models["llama-tied"], **kw)

    return build
