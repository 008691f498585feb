"""Compile isolation: constraint compiles run in worker processes that are killed when they
exceed their wall-time budget (or are cancelled) and cannot exceed their memory budget.

Light imports only: the worker process imports this package (see ``bootstrap``)."""

from .pool import CompileWorkerPool

__all__ = ["CompileWorkerPool"]
