"""A tiny random-weight GPT-OSS with GPT-OSS's real tokenizer, built offline for harmony tests.

The tokenizer is ``o200k_harmony``: o200k_base's 199,998 ranks (the ``quicktok-v1`` package
ships them; the file written here is byte-identical to OpenAI's ``o200k_base.tiktoken``, sha256
checked) plus the harmony special tokens at GPT-OSS's ids (``<|start|>`` 200006, ...), and the
model's published chat template. ``openai-harmony`` (OpenAI's own renderer / parser) loads the
same vocabulary file (``TIKTOKEN_ENCODINGS_BASE``), which makes it an oracle for both ends.
``o200k_tokenizer`` builds the other o200k_base tokenizers (Phi-4-mini's) the same way.
"""

from __future__ import annotations

import base64
import hashlib
import struct
from pathlib import Path

O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
# o200k_base's pre-tokenizer pattern (tiktoken_ext.openai_public)
O200K_PATTERN = "|".join(
    [
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"\p{N}{1,3}",
        r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
        r"\s*[\r\n]+",
        r"\s+(?!\S)",
        r"\s+",
    ]
)
NAMED = {
    199998: "<|startoftext|>",
    199999: "<|endoftext|>",
    200002: "<|return|>",
    200003: "<|constrain|>",
    200005: "<|channel|>",
    200006: "<|start|>",
    200007: "<|end|>",
    200008: "<|message|>",
    200012: "<|call|>",
    200018: "<|endofprompt|>",
}
VOCAB = 201088  # GPT-OSS's embedding rows
EOS_IDS = [200002, 199999, 200012]  # <|return|>, <|endoftext|>, <|call|>


def write_o200k_base(out_dir: Path) -> Path:
    """``o200k_base.tiktoken`` (base64 token, rank per line) from quicktok's binary table."""
    import quicktok

    path = out_dir / "o200k_base.tiktoken"
    if path.is_file():
        return path
    data = (Path(quicktok.__file__).parent / "data" / "o200k.vocab").read_bytes()
    (count,) = struct.unpack_from("<I", data, 0)
    off, lines = 4, []
    for _ in range(count):  # u16 length, bytes, u32 rank
        (n,) = struct.unpack_from("<H", data, off)
        token = data[off + 2 : off + 2 + n]
        (rank,) = struct.unpack_from("<I", data, off + 2 + n)
        off += 6 + n
        lines.append(f"{base64.b64encode(token).decode()} {rank}")
    text = "\n".join(lines) + "\n"
    if hashlib.sha256(text.encode()).hexdigest() != O200K_SHA256:
        raise ValueError("quicktok's o200k table is not o200k_base")
    out_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def o200k_tokenizer(
    out_dir: Path, named: dict[int, str], end: int, chat_template: str, **roles: str
):
    """An o200k_base tokenizer (GPT-OSS's, Phi-4-mini's) saved to ``out_dir``: the ranks, then
    special tokens at ids 199998..``end`` - 1 (``named``, the others reserved). ``roles``:
    ``bos_token``, ``eos_token``, ``pad_token`` by their text."""
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    vocab = write_o200k_base(out_dir / "tiktoken")
    specials = [named.get(i, f"<|reserved_{i}|>") for i in range(199998, end)]
    converted = TikTokenConverter(
        vocab_file=str(vocab), pattern=O200K_PATTERN, extra_special_tokens=specials
    ).converted()
    tok = PreTrainedTokenizerFast(tokenizer_object=converted, **roles)
    tok.chat_template = chat_template
    tok.save_pretrained(out_dir)
    return tok


def harmony_tokenizer(out_dir: Path, chat_template: str):
    """GPT-OSS's tokenizer (o200k_harmony + its chat template), saved to ``out_dir``."""
    roles = {"bos_token": "<|startoftext|>", "eos_token": "<|return|>"}
    return o200k_tokenizer(out_dir, NAMED, VOCAB, chat_template, **roles, pad_token="<|endoftext|>")


def build_tiny_gpt_oss(root: Path, chat_template: str) -> Path:
    """The tiny GPT-OSS of ``tiny_moe`` with GPT-OSS's vocabulary, tokenizer and stop tokens."""
    from transformers import GenerationConfig

    from stencil.testing.tiny_models import build_tiny_model
    from stencil.testing.tiny_moe import MOE_BUILDERS

    harmony_tokenizer(root / "tokenizer", chat_template)
    config = MOE_BUILDERS["gpt-oss"]()
    config.vocab_size = VOCAB
    config.max_position_embeddings = 4096
    out = build_tiny_model("gpt-oss-harmony", root / "model", root / "tokenizer", config)
    GenerationConfig(
        bos_token_id=199998, eos_token_id=EOS_IDS, pad_token_id=199999
    ).save_pretrained(out)
    return out


def steer(model_dir: Path, pairs: list[tuple[int, int]], scale: float = 200.0) -> None:
    """Make greedy decoding follow ``a -> b`` for each pair (any context): ``a``'s embedding
    becomes a large vector of its own, which dominates the residual stream, and ``b``'s output
    row reads it. Other tokens keep their random weights."""
    import torch
    from safetensors.torch import load_file, save_file

    path = model_dir / "model.safetensors"
    state = load_file(path)
    embed, head = state["model.embed_tokens.weight"], state["lm_head.weight"]
    norm = state["model.norm.weight"]  # [hidden]
    gen = torch.Generator().manual_seed(len(pairs))
    basis, _ = torch.linalg.qr(torch.randn(embed.shape[1], len(pairs), generator=gen))
    for k, (a, b) in enumerate(pairs):
        direction = basis[:, k]  # [hidden], unit
        embed[a] = scale * direction
        head[b] = scale * direction * norm / (norm * norm).sum().sqrt()
    save_file(state, path, metadata={"format": "pt"})
