"""Runs inside the vLLM virtual environment (never imported by Stencil): the same workload through
vLLM's offline engine. Reads a JSON job on stdin, prints one JSON result line on stdout."""

import json
import sys
import time


def main() -> None:
    job = json.load(sys.stdin)
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt
    from vllm.sampling_params import StructuredOutputsParams

    llm = LLM(model=job["model"], dtype=job.get("dtype", "float32"), max_model_len=job.get("max_model_len", 2048),
              seed=0, max_num_seqs=job.get("max_num_seqs", 64))
    params = []
    for item in job["items"]:
        extra = {}
        if item.get("schema") is not None:
            extra["structured_outputs"] = StructuredOutputsParams(json=item["schema"])
        params.append(SamplingParams(temperature=0, max_tokens=item["max_tokens"],
                                     ignore_eos=item.get("ignore_eos", True), **extra))
    prompts = [TokensPrompt(prompt_token_ids=i["prompt_ids"]) for i in job["items"]]
    llm.generate(prompts[:2], params[:2], use_tqdm=False)  # warm-up (compile)
    t = time.perf_counter()
    outs = llm.generate(prompts, params, use_tqdm=False)
    dt = time.perf_counter() - t
    tokens = sum(len(o.outputs[0].token_ids) for o in outs)
    texts = [o.outputs[0].text for o in outs]
    print("RESULT " + json.dumps({"seconds": dt, "output_tokens": tokens, "texts": texts}))


if __name__ == "__main__":
    main()
