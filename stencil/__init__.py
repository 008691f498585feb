"""Stencil: guaranteed structured output from local LLMs."""

from stencil.engine.config import EngineConfig
from stencil.engine.errors import ConfigError, EngineError, RequestError
from stencil.engine.llm import LLM
from stencil.engine.models.default_model import default_model_path
from stencil.engine.outputs import CompletionOutput, RequestOutput
from stencil.engine.sampling_params import SamplingParams
from stencil.engine.spec_decode.proposer import Proposal, Proposer

__all__ = [
    "LLM",
    "CompletionOutput",
    "ConfigError",
    "EngineConfig",
    "EngineError",
    "Proposal",
    "Proposer",
    "RequestError",
    "RequestOutput",
    "SamplingParams",
    "default_model_path",
]
