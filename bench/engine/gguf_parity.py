"""A real GGUF file kept quantized against transformers' forward of the same file dequantized to
fp32 by the ``gguf`` package (``gguf.quants.dequantize``, as transformers' GGUF loader does; that
loader needs ``accelerate``, so the weights are loaded here the same way): the same chat prompts, greedy tokens up to EOS, in Stencil (as stored,
int8-rounded activations) and in transformers' ``generate``; per prompt, how many leading tokens
agree, and the first step's top-5 tokens and the largest gap between the two logit vectors.

    python -m bench.engine.gguf_parity [--model qwen2.5-coder-1.5b] [--max-tokens 32] [--threads 2]

Greedy paths part where two tokens are nearly tied (activations rounded to int8 move a logit by
~1e-2); the first-step gap says how close the two forwards are."""

from __future__ import annotations

import argparse
import gc

import torch

from bench.common import table
from bench.engine.single_stream_bench import PROMPTS, prompt_ids
from stencil import LLM, SamplingParams
from stencil.engine.models.gguf import gguf_model_dir, read_gguf_tensors
from stencil.testing.real_models import REAL_MODELS, real_model_path


def stencil_runs(
    path, prompts: list[list[int]], max_tokens: int
) -> list[tuple[list, torch.Tensor]]:
    """Greedy tokens and the first step's logprobs (top 20) per prompt."""
    llm = LLM(str(path), max_model_len=2048)
    params = SamplingParams(temperature=0, max_tokens=max_tokens, logprobs=20)
    outs = llm.generate(prompts, params, use_tqdm=False)
    return [(list(o.outputs[0].token_ids), o.outputs[0].logprobs[0]) for o in outs]


def transformers_model(auto, config, weights: dict[str, torch.Tensor]) -> torch.nn.Module:
    """transformers' model of ``config`` holding ``weights``: built on the meta device and given
    the file's tensors (no random init beside them: half the peak memory, 13 GB for the 1.5B
    otherwise), its rotary tables recomputed; built whole where other buffers are not in the
    file."""
    with torch.device("meta"):
        hf = auto.from_config(config, dtype=torch.float32).eval()
    hf.load_state_dict(weights, strict=False, assign=True)
    hf.tie_weights()
    rotary = getattr(hf.model, "rotary_emb", None)  # computed at init, not loaded
    if rotary is not None:
        hf.model.rotary_emb = type(rotary)(config=rotary.config)
    if any(t.is_meta for t in [*hf.parameters(), *hf.buffers()]):
        hf = auto.from_config(config, dtype=torch.float32).eval()
        hf.load_state_dict(weights, strict=False)
        hf.tie_weights()
    return hf


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen2.5-coder-1.5b", choices=sorted(REAL_MODELS))
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    path = real_model_path(args.model)
    meta = gguf_model_dir(path)
    tok = AutoTokenizer.from_pretrained(str(meta))
    prompts = [prompt_ids(tok, p) for p in PROMPTS]
    ours = stencil_runs(path, prompts, args.max_tokens)
    gc.collect()  # Stencil's model gone before transformers' is built
    config = AutoConfig.from_pretrained(str(meta))
    weights = {k: torch.from_numpy(v) for k, v in read_gguf_tensors(path, config).items()}
    hf = transformers_model(AutoModelForCausalLM, config, weights)
    rows = []
    for text, ids, (tokens, first) in zip(PROMPTS, prompts, ours, strict=True):
        x = torch.tensor([ids])
        with torch.no_grad():
            logits = hf(x).logits[0, -1]
            want = hf.generate(x, max_new_tokens=args.max_tokens, do_sample=False)
            want = want[0, len(ids) :].tolist()
        agree = next(
            (i for i, (a, b) in enumerate(zip(tokens, want, strict=False)) if a != b), len(want)
        )
        theirs = torch.log_softmax(logits.float(), -1)
        gap = max(abs(lp.logprob - float(theirs[lp.token_id])) for lp in first.top)
        top = torch.topk(theirs, 5).indices.tolist()
        mine = [lp.token_id for lp in first.top[:5]]
        rows.append([text[:40], f"{agree}/{len(want)}", mine == top, f"{gap:.4f}"])
    print(f"{args.model}: Stencil (as stored) vs transformers on the file dequantized, greedy")
    print(table(["prompt", "tokens agreeing", "first step top-5 equal", "max |logprob gap|"], rows))


if __name__ == "__main__":
    main()
