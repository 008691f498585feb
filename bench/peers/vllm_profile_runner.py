"""Runs inside the vLLM virtual environment (never imported by Stencil): the engine workload
through vLLM's offline engine under ``torch.profiler``, with the engine core in this process
(``VLLM_ENABLE_V1_MULTIPROCESSING=0``, set by the caller) so the profiler sees the model. Reads a
JSON job on stdin, prints one JSON result line (ms per op category, wall, tokens) on stdout."""

import json
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

from bench.engine.profile_categories import categorize, labelled  # run with -m
from bench.workload import outside_prompt


def main() -> None:
    job = json.load(sys.stdin)
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt
    from vllm.model_executor.layers.logits_processor import LogitsProcessor
    from vllm.v1.sample.sampler import Sampler

    # the same labels as Stencil's run: the vocab projection and the sampler
    LogitsProcessor.forward = labelled("lm_head", LogitsProcessor.forward)
    Sampler.forward = labelled("sampling", Sampler.forward)
    llm = LLM(
        model=job["model"],
        dtype=job["dtype"],
        max_model_len=2048,
        seed=0,
        max_num_seqs=64,
        enable_prefix_caching=True,
    )
    items = job["items"]
    prompts = [TokensPrompt(prompt_token_ids=i["prompt_ids"]) for i in items]
    params = [
        SamplingParams(temperature=0, max_tokens=i["max_tokens"], ignore_eos=True) for i in items
    ]
    outside = TokensPrompt(prompt_token_ids=outside_prompt(items[0]["prompt_ids"]))
    warm = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
    llm.generate([outside] * 2, [warm] * 2, use_tqdm=False)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=False) as prof:
        t = time.perf_counter()
        outs = llm.generate(prompts, params, use_tqdm=False)
        wall = time.perf_counter() - t
    per_cat, top = categorize(prof.events())
    tokens = sum(len(o.outputs[0].token_ids) for o in outs)
    result = {
        "wall_ms": wall * 1000,
        "output_tokens": tokens,
        "categories": per_cat,
        "top": top,
        "threads": torch.get_num_threads(),
    }
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
