"""The sampler on a mixed batch: plain greedy rows (one batched argmax) next to rows with their own
processing, logprobs, sampling, a finished row and a failing row; each row's result is what it
gets alone (torch's argmax / log_softmax on the processed row as the oracle)."""

from __future__ import annotations

import torch

from stencil.engine.sampler import FAILED, Sampler, argmax_rows
from stencil.engine.sampling_params import SamplingParams
from stencil.engine.sequence import Sequence

VOCAB = 50
EOS = 3


def _seq(i: int, params: SamplingParams, outputs: int = 2) -> Sequence:
    tokens = [1, 2, 5] + [7] * outputs
    return Sequence(i, f"r{i}", 0, tokens, 3, params, 64, torch.Generator().manual_seed(i))


def _sampler() -> Sampler:
    return Sampler({EOS}, lambda t: (f"<{t}>", None))


def _batch() -> tuple[torch.Tensor, list[Sequence]]:
    logits = torch.randn(8, VOCAB, generator=torch.Generator().manual_seed(0))
    logits[4, EOS] = 50.0  # min_tokens must ban it
    seqs = [
        _seq(0, SamplingParams(temperature=0)),
        _seq(1, SamplingParams(temperature=0, logit_bias={11: 100.0})),
        _seq(2, SamplingParams(temperature=0, logprobs=2)),
        _seq(3, SamplingParams(temperature=0.8, seed=3)),
        _seq(4, SamplingParams(temperature=0, min_tokens=5)),
        _seq(5, SamplingParams(temperature=0)),
        _seq(6, SamplingParams(temperature=0, repetition_penalty=1.5)),
        _seq(7, SamplingParams(temperature=0)),
    ]
    seqs[5].finish("error", error="mask fill failed")
    return logits, seqs


def test_mixed_batch_rows_match_their_oracles() -> None:
    logits, seqs = _batch()
    original = logits.clone()
    out = _sampler()(logits, seqs)
    assert out[0].token == int(original[0].argmax()) and out[0].logprobs is None
    assert out[7].token == int(original[7].argmax())
    assert out[1].token == 11
    lp = torch.log_softmax(original[2], -1)
    assert out[2].token == int(original[2].argmax())
    assert out[2].logprobs.chosen.logprob == float(lp.max())
    assert [t.token_id for t in out[2].logprobs.top] == torch.topk(lp, 2).indices.tolist()
    assert out[4].token != EOS and out[4].token == int(original[4].topk(2).indices[1])
    assert out[5] is FAILED


def test_each_row_samples_as_it_would_alone() -> None:
    logits, seqs = _batch()
    together = _sampler()(logits.clone(), seqs)
    for i in range(len(seqs)):
        fresh, fresh_seqs = _batch()
        alone = _sampler()(fresh[i : i + 1].clone(), [fresh_seqs[i]])[0]
        assert alone.token == together[i].token and alone.failed == together[i].failed, i


def test_a_failing_row_ends_alone_beside_batched_greedy_rows() -> None:
    """A logit bias on a token beyond the vocabulary fails that row only."""
    logits = torch.randn(3, VOCAB, generator=torch.Generator().manual_seed(1))
    seqs = [
        _seq(0, SamplingParams(temperature=0)),
        _seq(1, SamplingParams(temperature=0, logit_bias={VOCAB + 7: 1.0})),
        _seq(2, SamplingParams(temperature=0)),
    ]
    out = _sampler()(logits.clone(), seqs)
    assert out[1] is FAILED and seqs[1].finish_reason == "error"
    assert [out[0].token, out[2].token] == logits[[0, 2]].argmax(-1).tolist()
    assert not seqs[0].is_finished and not seqs[2].is_finished


def test_argmax_rows_is_torch_argmax_on_ties_nan_and_masked_rows() -> None:
    logits = torch.randn(5, VOCAB, generator=torch.Generator().manual_seed(2))
    logits[0, [4, 9]] = 30.0  # a tie: the first
    logits[1, [6, 20]] = float("nan")  # NaN counts as the maximum
    logits[2] = float("-inf")  # a fully masked row
    logits[3, :40] = float("-inf")
    assert argmax_rows(logits) == logits.argmax(-1).tolist()
    assert argmax_rows(logits.double()) == logits.argmax(-1).tolist()
    assert argmax_rows(logits[:, ::2]) == logits[:, ::2].argmax(-1).tolist()


def test_a_token_inside_a_character_keeps_its_bytes():
    """``token_piece``: the embedded tokenizer's pieces of an emoji are U+FFFD as text and
    their real bytes, which join to the character (the API's logprobs ``bytes``)."""
    from transformers import AutoTokenizer

    from stencil.engine.models.default_model import default_model_path
    from stencil.engine.token_bytes import token_piece

    tok = AutoTokenizer.from_pretrained(str(default_model_path()))
    ids = tok("👉My é", add_special_tokens=False).input_ids
    pieces = [token_piece(tok, i) for i in ids]
    assert pieces[0] == ("\ufffd", b"\xf0\x9f") and pieces[-1] == (" é", None)
    assert b"".join(raw or text.encode() for text, raw in pieces) == "👉My é".encode()
