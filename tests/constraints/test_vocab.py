"""TokenVocab: exact token bytes, EOS ids and padding for two real vocabularies."""

from __future__ import annotations

import pytest

from stencil.constraints import Constraint, TokenVocab

TEXTS = [
    '{"name": "Ada Lovelace", "age": 36}',
    "Grüße, 世界! 🎉 naïve café\n\tend",
    "  leading spaces and trailing  ",
]


@pytest.mark.parametrize("which", ["smol", "qwen"])
@pytest.mark.parametrize("text", TEXTS)
def test_token_bytes_concatenate_to_text(request, which, text):
    tokenizer = request.getfixturevalue(f"{which}_tokenizer")
    vocab: TokenVocab = request.getfixturevalue(f"{which}_vocab")
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert b"".join(vocab.token_bytes(i) for i in ids) == text.encode()


def test_qwen_ids_match_qwen25(qwen_tokenizer, qwen_vocab):
    assert qwen_tokenizer.encode('{"', add_special_tokens=False) == [4913]
    assert qwen_vocab.tokenizer_size == 151_851
    assert qwen_vocab.vocab_size == 151_936
    assert qwen_vocab.eos_token_ids == (151_643, 151_645)
    assert qwen_vocab.token_bytes(151_644) == b"<|im_start|>"
    assert qwen_vocab.is_special(151_644)


def test_smol_vocab(smol_vocab):
    assert smol_vocab.tokenizer_size == 49_152
    assert smol_vocab.vocab_size == 49_216
    assert smol_vocab.eos_token_ids == (2,)
    assert smol_vocab.token_bytes(49_200) == b""  # padding


def test_byte_level_tokens_are_raw_bytes(qwen_tokenizer, qwen_vocab):
    # a token that is part of a multi-byte character decodes to raw (invalid UTF-8) bytes
    ids = qwen_tokenizer.encode("🎉", add_special_tokens=False)
    parts = [qwen_vocab.token_bytes(i) for i in ids]
    assert b"".join(parts) == "🎉".encode()


def test_padding_ids_never_allowed(smol_compiler, smol_vocab):
    from constraint_helpers import allowed

    for c in [Constraint.regex(".*"), Constraint.json_object()]:
        ids = allowed(smol_compiler.compile(c).new_matcher(), smol_vocab)
        assert max(ids) < smol_vocab.tokenizer_size


def test_vocab_size_below_tokenizer_is_rejected(smol_tokenizer):
    with pytest.raises(ValueError):
        TokenVocab.from_hf(smol_tokenizer, 1000)


def test_sentencepiece_byte_fallback():
    """A Llama-2 style SentencePiece model (``▁`` for space, ``<0x0A>`` byte tokens)."""
    from tokenizers import Tokenizer, decoders, models, normalizers
    from transformers import PreTrainedTokenizerFast

    pieces = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    pieces += ["▁", "a", "b", "▁a", "ab"]
    model = models.BPE(
        vocab={p: i for i, p in enumerate(pieces)},
        merges=[("▁", "a"), ("a", "b")],
        byte_fallback=True,
        unk_token="<unk>",
    )
    backend = Tokenizer(model)
    backend.normalizer = normalizers.Sequence(
        [normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")]
    )
    backend.decoder = decoders.Sequence(
        [
            decoders.Replace("▁", " "),
            decoders.ByteFallback(),
            decoders.Fuse(),
            decoders.Strip(" ", 1, 0),
        ]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    vocab = TokenVocab.from_hf(tokenizer, 320)
    assert vocab.token_bytes(pieces.index("<0x0A>")) == b"\n"
    assert vocab.token_bytes(pieces.index("▁a")) == b" a"
    assert vocab.token_bytes(pieces.index("ab")) == b"ab"
    assert vocab.eos_token_ids == (2,)
