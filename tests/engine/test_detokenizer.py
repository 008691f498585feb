"""Incremental detokenization (multi-byte characters split across tokens) and stop-string search
over streamed chunks, checked against full decoding and a brute-force oracle."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from stencil import SamplingParams
from stencil.engine.detokenizer import Detokenizer, find_stop
from stencil.engine.sequence import Sequence

ALPHABET = "ab é世界🎉\n.,'\"{}:0123"


def _seq(prompt_ids, params=None):
    params = params or SamplingParams()
    return Sequence(1, "r", 0, list(prompt_ids), len(prompt_ids), params, 10_000, torch.Generator())


def _stream(detok, seq, out_ids):
    deltas = []
    for t in out_ids:
        seq.token_ids.append(t)
        deltas.append(detok.step(seq))
    deltas.append(detok.step(seq, final=True))
    return deltas


@settings(max_examples=120, deadline=None)
@given(prompt=st.text(ALPHABET, min_size=1, max_size=12), out=st.text(ALPHABET, max_size=24))
def test_incremental_text_equals_full_decode(tokenizer, prompt, out):
    detok = Detokenizer(tokenizer)
    p_ids = tokenizer(prompt, add_special_tokens=False).input_ids
    o_ids = tokenizer(out, add_special_tokens=False).input_ids
    seq = _seq(p_ids)
    deltas = _stream(detok, seq, o_ids)
    assert seq.text == tokenizer.decode(o_ids) == out
    assert "".join(deltas) == out
    # a delta never shows half of a multi-byte character
    assert all("\ufffd" not in d for d in deltas)


def test_emoji_split_over_byte_tokens_is_emitted_once_complete(tokenizer):
    detok = Detokenizer(tokenizer)
    o_ids = tokenizer("🎉🎉", add_special_tokens=False).input_ids
    assert len(o_ids) > 2  # byte-level pieces
    seq = _seq(tokenizer("hi", add_special_tokens=False).input_ids)
    deltas = _stream(detok, seq, o_ids)
    assert [d for d in deltas if d] == ["🎉", "🎉"] or "".join(deltas) == "🎉🎉"
    assert seq.text == "🎉🎉"


def test_special_tokens_skipped_or_kept(tokenizer):
    ids = tokenizer("ok", add_special_tokens=False).input_ids + [2]  # <|im_end|>
    for skip, want in ((True, "ok"), (False, "ok<|im_end|>")):
        seq = _seq([1, 5], SamplingParams(skip_special_tokens=skip))
        _stream(Detokenizer(tokenizer), seq, ids)
        assert seq.text == want


@settings(max_examples=300, deadline=None)
@given(
    text=st.text("ab", min_size=1, max_size=30),
    cuts=st.lists(st.integers(1, 5), min_size=1, max_size=30),
    stops=st.lists(st.text("ab", min_size=1, max_size=4), min_size=1, max_size=3),
)
def test_find_stop_never_misses_the_first_completed_stop(text, cuts, stops):
    """Feeding ``text`` in chunks, the first chunk where find_stop hits is the chunk in which the
    first stop occurrence (by end position) completes, and it cuts at that occurrence's start
    (the earliest start among occurrences completing in that chunk)."""
    chunks, i = [], 0
    for c in cuts:
        if i >= len(text):
            break
        chunks.append(text[i : i + c])
        i += c
    if i < len(text):
        chunks.append(text[i:])
    occ = [(j + len(s), j, s) for s in stops for j in range(len(text)) if text.startswith(s, j)]
    seen = ""
    for chunk in chunks:
        before = len(seen)
        seen += chunk
        hit = find_stop(seen, len(chunk), stops)
        ending_here = [(j, s) for end, j, s in occ if before < end <= len(seen)]
        ended_before = [o for o in occ if o[0] <= before]
        assert not ended_before, "a stop completed earlier was missed"
        if ending_here:
            assert hit is not None
            assert hit[0] == min(j for j, _ in ending_here)
            assert seen.startswith(hit[1], hit[0])
            return
        assert hit is None, f"false hit {hit} in {seen!r}"
    assert not occ


@settings(max_examples=60, deadline=None)
@given(ids=st.lists(st.integers(0, 49151), max_size=12), skip=st.booleans())
def test_backend_decode_equals_the_tokenizers_decode(tokenizer, ids, skip):
    detok = Detokenizer(tokenizer)
    assert detok.decode is not tokenizer.decode  # the embedded fast tokenizer takes the Rust path
    assert detok.decode(ids, skip_special_tokens=skip) == tokenizer.decode(
        ids, skip_special_tokens=skip
    )


def test_tokenizer_that_cleans_up_spaces_keeps_its_own_decode(default_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(default_model_dir), clean_up_tokenization_spaces=True)
    assert Detokenizer(tok).decode == tok.decode
