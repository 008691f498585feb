"""``stencil extract``: schema-shaped JSON out of many files, in one batched, resumable run.

    stencil extract --schema invoice docs/ 'mail/**/*.html' --out results.jsonl

Each file gets one JSONL record (see ``stencil.extract.records``); a rerun skips files whose path and
content hash already have a record (``--retry-errors`` redoes failed ones, ``--overwrite`` starts
over). Exit code: 0 all ok, 1 some files failed (listed), 2 usage errors.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from stencil.engine.flags import add_engine_flags, engine_kwargs
from stencil.extract.documents import InputError, discover
from stencil.extract.engine_backend import ExtractSpec
from stencil.extract.prompt import PromptTemplate, TemplateError
from stencil.extract.ray_backend import LOCAL, RayUnavailable
from stencil.extract.results import ResultsError, ResultsFile, read_records
from stencil.extract.review import write_review
from stencil.extract.run_loop import Run, scan_hashes
from stencil.extract.schema_library import SchemaError, list_schemas, resolve_schema
from stencil.extract.server_backend import ServerUnavailable


class UsageError(ValueError):
    """Bad or missing flags (exit code 2)."""


USAGE_ERRORS = (
    InputError,
    SchemaError,
    TemplateError,
    ResultsError,
    RayUnavailable,
    ServerUnavailable,
    UsageError,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``extract`` subcommand's flags (engine flags included, as ``serve`` has them)."""
    parser.add_argument(
        "files",
        nargs="*",
        metavar="FILES_OR_GLOBS",
        help="files, directories (recursed) or globs ('docs/**/*.pdf')",
    )
    parser.add_argument("--schema", help="a JSON Schema file or a library name (--list-schemas)")
    parser.add_argument("--out", metavar="JSONL", help="results file (appended to; resumable)")
    parser.add_argument("--list-schemas", action="store_true", help="list library schemas")
    parser.add_argument(
        "--review",
        metavar="HTML",
        help="also write one self-contained page of the documents with their values marked "
        "(without FILES: every record already in --out)",
    )
    parser.add_argument(
        "--prompt-template",
        metavar="FILE",
        help="template with {schema} {document} {instructions} {filename}; "
        "a '---' line splits system from user",
    )
    parser.add_argument("--instructions", default="", help="extra instructions for the model")
    parser.add_argument("--max-tokens", type=int, default=256, help="output tokens per document")
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument(
        "--grounded",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="plain string fields (no format but email, no pattern/enum/const) only take verbatim "
        "spans of the document, free numbers and dates only ones it states (default: on; "
        "x-grounded in the schema grounds a field either way)",
    )
    parser.add_argument(
        "--per-field",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="one short question per top-level field over the shared document prefix (a "
        "--prompt-template renders that prefix), each narrowed to what the document's labels "
        "state, then one record (default: on, with --server too; --no-per-field: one request "
        "per document)",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="requests in flight (--server: default 8; local: default all)",
    )
    parser.add_argument(
        "--server",
        metavar="URL",
        help="an OpenAI-compatible server instead of the in-process engine",
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="--server request timeout")
    parser.add_argument(
        "--ray",
        nargs="?",
        const=LOCAL,
        default=None,
        metavar="ADDRESS",
        help="run on Ray (a local instance, or the cluster at ADDRESS)",
    )
    parser.add_argument("--ray-actors", type=int, default=1, help="engine actors (--ray)")
    parser.add_argument(
        "--ray-batch-size", type=int, default=16, help="files per batch sent to an actor (--ray)"
    )
    parser.add_argument(
        "--ray-max-retries",
        type=int,
        default=3,
        help="restarts of a killed actor and retries of its batch; then its files get error "
        "records (--ray)",
    )
    parser.add_argument("--overwrite", action="store_true", help="discard earlier results")
    parser.add_argument("--retry-errors", action="store_true", help="redo files that failed")
    add_engine_flags(parser)


def run(args: argparse.Namespace, *, llm: Any = None) -> int:
    """Run ``stencil extract``; returns the exit code. ``llm``: an already loaded
    ``stencil.LLM`` to use instead of loading one from the engine flags (tests, notebooks)."""
    if args.list_schemas:
        return _list_schemas()
    if args.review and args.out and not args.files:
        return _review(args.review, _read_records(args.out), None)
    try:
        _check_usage(args)
        name, schema = resolve_schema(args.schema)
        spec = _spec(args, schema)
        paths = discover(args.files, exclude=[args.out])
        with ResultsFile(args.out) as results:
            current = scan_hashes(paths)
            resume = results.resume(
                current, overwrite=args.overwrite, retry_errors=args.retry_errors
            )
            todo = [p for p in paths if p not in resume.records]
            _say(
                f"{len(paths)} files, {len(paths) - len(todo)} already done, {len(todo)} to "
                f"extract with schema {name!r}"
                + (f" ({resume.torn} torn line(s) repaired)" if resume.torn else "")
            )
            backend = _backend(args, spec, llm)
            summary = Run(results, spec.schema, backend, progress=sys.stderr.isatty()).run(todo)
    except USAGE_ERRORS as e:
        _say(f"stencil extract: {e}")
        return 2
    except KeyboardInterrupt:
        _say(f"stencil extract: interrupted; rerun the same command to resume ({args.out})")
        return 130
    print(summary.table(paths, resume.records, args.out))
    if args.review:
        _review(args.review, _read_records(args.out), paths)
    return 0 if summary.failed == 0 and not _earlier_failures(paths, resume.records) else 1


def _check_usage(args: argparse.Namespace) -> None:
    if not args.schema:
        raise UsageError("--schema is required (a file or a name from --list-schemas)")
    if not args.files:
        raise UsageError("no input files given")
    if not args.out:
        raise UsageError("--out is required (the results JSONL)")
    if args.max_tokens < 1:
        raise UsageError("--max-tokens must be >= 1")
    if args.concurrency is not None and args.concurrency < 1:
        raise UsageError("--concurrency must be >= 1")
    if args.server and args.ray:
        raise UsageError("--server and --ray cannot be combined")


def _spec(args: argparse.Namespace, schema: dict[str, Any]) -> ExtractSpec:
    from stencil.constraints import ConstraintError, UnstatedValueError, translate

    spec = ExtractSpec(
        schema,
        PromptTemplate.load(args.prompt_template),
        args.instructions,
        args.max_tokens,
        args.temperature,
        args.grounded,
        args.grounded,
        args.grounded,
        args.per_field,
    )
    # unsupported schemas: usage errors before a model loads; the check's stand-in document
    # states no value, so a required one it lacks is no error of the schema
    try:
        translate(spec.constraint())
    except UnstatedValueError:
        pass
    except ConstraintError as e:
        raise SchemaError(f"the schema cannot be enforced: {e}") from e
    return spec


def _backend(args: argparse.Namespace, spec: ExtractSpec, llm: Any) -> Any:
    """The extractor: ``run(jobs) -> Iterator[Outcome]``. Models load lazily here."""
    kwargs = engine_kwargs(args)
    if args.server:
        from stencil.extract.server_backend import ServerExtractor

        _quiet("httpx", "openai")  # one INFO line per request drowns the progress bar

        return ServerExtractor(
            args.server, spec, kwargs.get("model"), args.concurrency or 8, args.timeout
        )
    if args.ray:
        from stencil.extract.ray_backend import RayExtractor

        _quiet("ray", "ray.data")

        return RayExtractor(
            args.ray,
            spec,
            kwargs,
            actors=args.ray_actors,
            batch_size=args.ray_batch_size,
            max_retries=args.ray_max_retries,
        )
    return _LazyEngine(spec, kwargs, args.concurrency, llm)


class _LazyEngine:
    """Loads the model only when there is something to extract."""

    def __init__(
        self, spec: ExtractSpec, kwargs: dict[str, Any], window: int | None, llm: Any
    ) -> None:
        self.spec, self.kwargs, self.window, self.llm = spec, kwargs, window, llm

    def run(self, jobs: list) -> Any:
        if not jobs:
            return iter(())
        from stencil.engine.llm import LLM
        from stencil.extract.engine_backend import EngineExtractor

        llm = self.llm if self.llm is not None else LLM(**self.kwargs)
        return EngineExtractor(llm, self.spec, self.window).run(jobs)


def _read_records(path: str) -> list[dict[str, Any]] | None:
    try:
        return read_records(path)
    except ResultsError as e:
        _say(f"stencil extract: {e}")
        return None


def _review(out: str, records: list[dict[str, Any]] | None, paths: list[str] | None) -> int:
    """Write the ``--review`` page of ``records`` (those of ``paths`` when given)."""
    if records is None:
        return 2
    if paths is not None:
        order = {p: i for i, p in enumerate(paths)}
        records = sorted((r for r in records if r["file"] in order), key=lambda r: order[r["file"]])
    try:
        count = write_review(out, records)
    except OSError as e:
        _say(f"stencil extract: cannot write {out!r}: {e.strerror or e}")
        return 2
    _say(f"review of {count} documents: {out}")
    return 0


def _earlier_failures(paths: list[str], records: dict[str, dict[str, Any]]) -> bool:
    return any(p in records and not records[p].get("ok") for p in paths)


def _list_schemas() -> int:
    schemas = list_schemas()
    if not schemas:
        _say("no library schemas found (looked in $STENCIL_SCHEMAS_DIR, ./schemas)")
        return 1
    width = max(len(s.name) for s in schemas)
    for s in schemas:
        print(f"{s.name:<{width}}  {s.description}  [required: {', '.join(s.required)}]")
    return 0


def _quiet(*loggers: str) -> None:
    for name in loggers:
        logging.getLogger(name).setLevel(max(logging.WARNING, logging.root.level))


def _say(message: str) -> None:
    print(message, file=sys.stderr)
