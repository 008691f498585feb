"""Typed errors of the constraint compiler. All are ``ValueError``s: the HTTP layer answers 400."""

from __future__ import annotations


class ConstraintError(ValueError):
    """Base of every error about a user-supplied constraint."""

    def __reduce__(self):  # picklable (compile workers send them back) whatever __init__ takes
        return (_restore, (type(self), str(self), dict(vars(self))))


def _restore(cls: type[ConstraintError], message: str, attrs: dict) -> ConstraintError:
    error = cls.__new__(cls)
    ValueError.__init__(error, message)
    vars(error).update(attrs)
    return error


class InvalidSchemaError(ConstraintError):
    """Not valid JSON, not a JSON Schema, a dangling ``$ref``, or an unsatisfiable schema."""

    def __init__(self, message: str, pointer: str = "") -> None:
        self.pointer = pointer
        where = f" at {pointer!r}" if pointer else ""
        super().__init__(f"invalid JSON schema{where}: {message}")


class UnsupportedSchemaError(ConstraintError):
    """A valid schema keyword that Stencil cannot enforce (never silently ignored)."""

    def __init__(self, keyword: str, pointer: str, detail: str = "") -> None:
        self.keyword = keyword
        self.pointer = pointer
        extra = f": {detail}" if detail else ""
        super().__init__(
            f"unsupported JSON schema keyword {keyword!r} at {pointer or '/'!r}{extra}"
        )


class UnstatedValueError(ConstraintError):
    """A required grounded value that the source text does not state (no span fits it): about
    the document, not the schema."""


class InvalidRegexError(ConstraintError):
    """A regular expression that does not parse (in a schema: naming its keyword and pointer)."""

    def __init__(self, message: str, keyword: str = "", pointer: str = "") -> None:
        self.keyword = keyword
        self.pointer = pointer
        where = f" (keyword {keyword!r} at {pointer or '/'!r})" if keyword else ""
        super().__init__(message + where)


class InvalidGrammarError(ConstraintError):
    """A grammar that does not parse, or whose start rule derives no string."""


class ConstraintTooLargeError(ConstraintError):
    """A constraint over a configured size budget (text size, depth, enum size, repetition)."""

    def __init__(self, message: str, budget: str) -> None:
        self.budget = budget
        super().__init__(f"{message} (budget {budget!r})")


class CompileTimeoutError(ConstraintError):
    """A compile that did not finish within the compile-time budget."""

    def __init__(self, seconds: float, budget: str = "timeout_s") -> None:
        self.budget = budget
        self.seconds = seconds
        super().__init__(f"constraint compile exceeded the {budget}={seconds:g}s budget")


class CompileMemoryError(ConstraintTooLargeError):
    """A compile that needed more memory than its worker's budget (the worker was replaced)."""

    def __init__(self, memory_bytes: int, budget: str = "memory_bytes") -> None:
        self.memory_bytes = memory_bytes
        super().__init__(
            f"constraint compile exceeded the memory budget of {memory_bytes / 2**20:g} MiB",
            budget,
        )


class CompileCancelledError(ConstraintError):
    """The compile was cancelled (its request went away); its worker was killed."""


class CompileCrashError(ConstraintError):
    """The compile worker died while compiling this constraint (it was replaced)."""


class CompileWorkerError(RuntimeError):
    """The compile worker pool is unusable (a worker did not start, or the pool is closed).
    Not the constraint's fault: a server error, not a 400."""
