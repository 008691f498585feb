"""A chat or completion request -> the engine request (``Plan``): prompt token ids,
``SamplingParams`` with at most one ``Constraint``, and the tool-parsing plan, as plain values.

The request is read here once, each field group by its stage, and each stage gets explicit
values and hands plain values on: the request surface (``surface``), the structured-output
fields (``structured_output``), the tools (``tools.plan``, ``tools.constraint``), the one
constraint (``constraint``), the prompt (``chat_prompt``: messages, tools, chat template, token
ids) and the sampling fields (``sampling``); no stage calls back into one before it
(``tests/api/test_request_walk.py``). Every bad input becomes an ``APIError`` (HTTP 400 naming
the field) before anything is scheduled.
"""

from __future__ import annotations

from stencil.api.model_info import ModelInfo
from stencil.api.openai.chat_prompt import chat_prompt
from stencil.api.openai.constraint import single_constraint
from stencil.api.openai.prompt_tokens import completion_prompts
from stencil.api.openai.protocol import ChatCompletionRequest, CompletionRequest
from stencil.api.openai.sampling import sampling_params
from stencil.api.openai.structured_output import structured_output
from stencil.api.openai.surface import check_chat_surface, check_completion_surface
from stencil.api.request_plan import Plan, ToolParsing
from stencil.api.tools.constraint import tool_sources
from stencil.api.tools.harmony import FINAL_MARKER
from stencil.api.tools.plan import plan_tools


def convert_chat(req: ChatCompletionRequest, model: ModelInfo) -> Plan:
    """Convert a chat request; raises APIError (400) for anything that cannot be honoured."""
    template_fields = check_chat_surface(req, model.chat_template)
    wanted = structured_output(req)
    tools = plan_tools(req.tools, req.tool_choice, req.parallel_tool_calls)
    fmt, harmony = model.call_format, model.harmony
    tokens, special = model.call_tokens
    sources = wanted.sources
    if tools is not None:
        sources = tool_sources(sources, tools, fmt, tokens, harmony, wanted.grounding)
    constraint = single_constraint(sources, wanted.whitespace, wanted.grounding)
    prompt = chat_prompt(
        req.messages,
        model,
        offered=tools.offered if tools is not None else (),
        add_generation_prompt=req.add_generation_prompt,
        continue_final_message=req.continue_final_message,
        template_fields=template_fields,
        chat_template_kwargs=req.chat_template_kwargs,
    )
    ids = prompt.ids
    params = sampling_params(
        req,
        prompt_len=len(ids),
        prompt_param="messages",
        max_tokens=req.max_completion_tokens or req.max_tokens,
        max_tokens_param="max_completion_tokens" if req.max_completion_tokens else "max_tokens",
        constraint=constraint,
        max_model_len=model.max_model_len,
        vocab_size=model.vocab_size,
    )
    if tools is not None and special:
        params.skip_special_tokens = False  # the trigger token's text marks where calls begin
    if harmony is not None:
        params.skip_special_tokens = False  # the channels are parsed from the special tokens
        if tools is None and constraint is not None:
            params.reasoning_end = FINAL_MARKER  # the answer channel only; analysis is free
    if req.logprobs:
        params.logprobs = req.top_logprobs or 0
    last = prompt.messages[-1]
    echo = last["content"] if req.echo and last["role"] == "assistant" else ""
    param = sources[0].param if sources else None
    parsing = None
    if tools is not None:
        answer = param is not None and sources[0].kind == "calls_or_answer"
        parsing = ToolParsing(fmt, tools.mode == "auto", tools.tool_names, answer)
    return Plan(ids, prompt.text, params, parsing, harmony is not None, echo, param)


def convert_completion(req: CompletionRequest, model: ModelInfo) -> list[Plan]:
    """Convert a completion request into one plan per prompt."""
    check_completion_surface(req)
    wanted = structured_output(req)
    constraint = single_constraint(wanted.sources, wanted.whitespace, wanted.grounding)
    param = wanted.sources[0].param if wanted.sources else None
    prompts = completion_prompts(req.prompt, model.tokenizer, model.max_model_len, model.vocab_size)
    plans = []
    for ids, text in prompts:
        params = sampling_params(
            req,
            prompt_len=len(ids),
            prompt_param="prompt",
            max_tokens=req.max_tokens,
            max_tokens_param="max_tokens",
            constraint=constraint,
            max_model_len=model.max_model_len,
            vocab_size=model.vocab_size,
        )
        params.logprobs = req.logprobs
        plans.append(
            Plan(ids, text, params, echo_text=text if req.echo else "", constraint_param=param)
        )
    return plans
