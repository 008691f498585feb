"""Runs inside the vLLM virtual environment (never imported by Stencil): the same workload through
vLLM's offline engine. Reads a JSON job on stdin, prints one JSON result line on stdout."""

import json
import sys
import time

from bench.workload import outside_prompt  # run as ``-m bench.peers.vllm_runner`` from the repo


def main() -> None:
    job = json.load(sys.stdin)
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt
    from vllm.sampling_params import StructuredOutputsParams

    llm = LLM(
        model=job["model"],
        dtype=job.get("dtype", "float32"),
        max_model_len=job.get("max_model_len", 2048),
        seed=0,
        max_num_seqs=job.get("max_num_seqs", 64),
        enable_prefix_caching=job.get("prefix_caching", True),
    )

    def sampling(item, max_tokens):
        extra = {}
        if item.get("schema") is not None:
            extra["structured_outputs"] = StructuredOutputsParams(json=item["schema"])
        return SamplingParams(
            temperature=0, max_tokens=max_tokens, ignore_eos=item.get("ignore_eos", True), **extra
        )

    prompts = [TokensPrompt(prompt_token_ids=i["prompt_ids"]) for i in job["items"]]
    # probes and warm-up run on a prompt outside the workload: on the workload's own prompts they
    # would leave its prefixes in vLLM's prefix cache and the timed prefill would hit them
    outside = TokensPrompt(prompt_token_ids=outside_prompt(job["items"][0]["prompt_ids"]))
    # vLLM refuses a whole batch for one constraint it rejects (say a schema with format "binary"):
    # probe each request's constraint alone with one token, time only the ones it accepts
    kept = [i for i, item in enumerate(job["items"]) if _accepts(llm, outside, sampling(item, 1))]
    prompts = [prompts[i] for i in kept]
    params = [sampling(job["items"][i], job["items"][i]["max_tokens"]) for i in kept]
    llm.generate([outside] * len(params[:2]), params[:2], use_tqdm=False)  # warm-up (compile)
    t = time.perf_counter()
    outs = llm.generate(prompts, params, use_tqdm=False)
    dt = time.perf_counter() - t
    tokens = sum(len(o.outputs[0].token_ids) for o in outs)
    texts = [o.outputs[0].text for o in outs]
    print(
        "RESULT "
        + json.dumps(
            {
                "seconds": dt,
                "output_tokens": tokens,
                "texts": texts,
                "rejected": len(job["items"]) - len(kept),
            }
        )
    )


def _accepts(llm, prompt, probe) -> bool:
    try:
        llm.generate([prompt], [probe], use_tqdm=False)
        return True
    except Exception as e:  # vLLM's validation errors have no common public base
        print(f"vLLM rejected a request: {str(e)[:200]}", file=sys.stderr)
        return False


if __name__ == "__main__":
    main()
