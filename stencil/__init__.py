"""Stencil: guaranteed structured output from local LLMs."""
