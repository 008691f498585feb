"""Stencil: guaranteed structured output from local LLMs."""

from stencil.engine.config import EngineConfig
from stencil.engine.errors import ConfigError, EngineError, RequestError
from stencil.engine.llm import LLM
from stencil.engine.models.default_model import default_model_path
from stencil.engine.outputs import CompletionOutput, RequestOutput
from stencil.engine.sampling_params import SamplingParams

__all__ = [
    "LLM",
    "CompletionOutput",
    "ConfigError",
    "EngineConfig",
    "EngineError",
    "RequestError",
    "RequestOutput",
    "SamplingParams",
    "default_model_path",
]
