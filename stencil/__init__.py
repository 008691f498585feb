"""Stencil: guaranteed structured output from local LLMs."""

import os

# OpenMP team threads sleep as soon as a parallel region ends instead of spinning for the next one
# (libgomp reads this once, when torch loads it: so only when stencil is imported before torch;
# an explicit OMP_WAIT_POLICY or GOMP_SPINCOUNT is kept). On a busy machine a spinning thread
# burns the CPU time its partner's region is waiting for: a 1-request decode step of
# bench/engine/moe_bench.py's model (4 layers, 2 threads, load 3) took 280 ms spinning, 16 ms
# passive, 23-33 ms on one thread.
if "GOMP_SPINCOUNT" not in os.environ:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

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
