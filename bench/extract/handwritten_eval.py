"""``stencil extract`` on the hand-written corpus (``bench/extract/handwritten/``), per model,
beside a rules-alone baseline; scored per field kind (``stencil.testing.field_scoring``).

    python -m bench.extract.handwritten_eval [--split heldout|dev] [--models rules embedded
        gemma3-270m qwen2.5-coder-0.5b qwen2.5-coder-1.5b PATH ...] [--kinds jobs ...]
        [--records DIR] [--threads N] [-- EXTRACT FLAGS]

Each model runs ``stencil extract`` through its Python entry (``stencil.extract.command.run``
with the CLI's parser: default flags, one model load for every kind), one schema per kind; flags
after ``--`` go to every run (``-- --no-grounded``; engine flags such as ``--kv-cache-memory``
shape the one engine). ``--records DIR`` keeps each model's
results files (``DIR/<model>/<kind>.jsonl``): a rerun resumes where one stopped.

``rules`` is the pipeline with no model's judgement: the embedded model's fp32 directory with
its final norm weight (``model.norm.weight``) set to zeros, so every logit is 0 and greedy
decoding takes the lowest token the constraint allows: the schema, grounding and the field
rules alone decide. Tune on ``--split dev``; ``heldout`` is for the reported figures only.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench.common import table
from stencil.testing.field_scoring import Tally, score_record

CORPUS = Path(__file__).resolve().parent / "handwritten"
REAL = ("gemma3-270m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b")
KINDS_OF_FIELD = (
    "string", "number", "date", "enum", "boolean", "array of strings", "array of objects",
)  # fmt: skip
SUMMARY = (
    "fields right", "present fields right", "optional-field recall", "absent fields absent",
    "array-item recall", "array-item precision", "item sub-fields right", "files ok",
)  # fmt: skip
COUNTS = ("invented values", "strings not in the document", "placeholder values")


def split_docs(split: str, kinds: list[str] | None, numbers: list[str] | None = None) -> list[str]:
    """The split's document ids (``kind/NN``), optionally only some kinds and numbers."""
    docs = json.loads((CORPUS / "split.json").read_text(encoding="utf-8"))[split]
    return [
        d
        for d in docs
        if (kinds is None or d.split("/")[0] in kinds)
        and (numbers is None or d.split("/")[1] in numbers)
    ]


def doc_path(doc: str) -> Path:
    kind, name = doc.split("/")
    (path,) = (CORPUS / kind / "docs").glob(f"{name}.*")
    return path


def rules_alone_model() -> Path:
    """The embedded model's fp32 directory with ``model.norm.weight`` zeroed (all logits 0),
    made once under the cache."""
    from safetensors.torch import load_file, save_file

    from stencil.engine.models.default_model import default_model_path
    from stencil.paths import cache_root

    out = cache_root() / "bench" / "rules-alone"
    if (out / "model.safetensors").is_file():
        return out
    source, partial = default_model_path(), out.with_name("rules-alone.partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    for f in source.iterdir():
        if f.name != "model.safetensors":
            shutil.copy(f, partial / f.name)
    weights = load_file(source / "model.safetensors")
    weights["model.norm.weight"].zero_()
    save_file(weights, str(partial / "model.safetensors"), metadata={"format": "pt"})
    partial.rename(out)
    return out


def model_path(name: str) -> str | None:
    """``embedded`` -> None (``LLM()``'s default), ``rules`` -> the zero-norm copy, a real
    model's name -> its cached GGUF file, else a path as given."""
    if name == "embedded":
        return None
    if name == "rules":
        return str(rules_alone_model())
    if name in REAL:
        from stencil.testing.real_models import real_model_path

        return str(real_model_path(name))
    return name


def extract(
    name: str, docs: list[str], records: Path, flags: list[str], threads: int | None
) -> tuple[dict[str, dict], float]:
    """Run ``stencil extract`` with model ``name`` over ``docs``, one run per kind; returns
    {doc: record} and the seconds spent extracting (model load excluded)."""
    from stencil import LLM
    from stencil.cli import build_parser
    from stencil.engine.flags import engine_kwargs
    from stencil.extract import command

    kwargs = engine_kwargs(build_parser().parse_args(["extract", *flags]))  # -- --kv-cache-memory
    kwargs.pop("model", None)
    if threads:
        kwargs["num_threads"] = threads
    llm = LLM(model_path(name), **kwargs)
    by_kind: dict[str, list[str]] = {}
    for d in docs:
        by_kind.setdefault(d.split("/")[0], []).append(d)
    start = time.perf_counter()
    for kind, group in by_kind.items():
        results = records / f"{kind}.jsonl"
        paths = {str(doc_path(d)): d for d in group}
        argv = ["extract", "--schema", str(CORPUS / kind / "schema.json"), *paths]
        args = build_parser().parse_args([*argv, "--out", str(results), *flags])
        with contextlib.redirect_stdout(sys.stderr):  # its summary table: progress, not result
            command.run(args, llm=llm)
    seconds = time.perf_counter() - start
    del llm
    gc.collect()
    return read_records(docs, records), seconds


def read_records(docs: list[str], records: Path) -> dict[str, dict]:
    """{doc: record} from the results files under ``records`` (paths matched by file name
    below the corpus, so records made in another checkout are found too)."""
    wanted = {str(doc_path(d).relative_to(CORPUS)): d for d in docs}
    out = {}
    for results in sorted(records.glob("*.jsonl")):
        for line in results.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            rel = record.get("file", "").rpartition("/handwritten/")[2]
            if rel in wanted:
                out[wanted[rel]] = record
    return out


def score(docs: list[str], records: dict[str, dict]) -> dict[str, Tally]:
    """Tallies: ``all`` and one per document kind."""
    from stencil.extract.documents import read_document

    tallies: dict[str, Tally] = {"all": Tally()}
    for d in docs:
        kind, name = d.split("/")
        schema = json.loads((CORPUS / kind / "schema.json").read_text(encoding="utf-8"))
        truth = json.loads((CORPUS / kind / "truth" / f"{name}.json").read_text(encoding="utf-8"))
        text = read_document(str(doc_path(d))).text or ""
        tally = score_record(schema, truth, records.get(d), text)
        tallies["all"].merge(tally)
        tallies.setdefault(kind, Tally()).merge(tally)
    return tallies


def _pct(hits: int, total: int) -> str:
    return f"{100 * hits / total:.0f}% ({hits}/{total})" if total else "-"


def _per_minute(files: int, seconds: float | None) -> str:
    return f"{60 * files / seconds:.1f}" if seconds and seconds >= 1 else "-"


def result_tables(results: dict[str, dict[str, Tally]], seconds: dict[str, float]) -> str:
    """Markdown: the summary, fields right per field kind, fields right per document kind;
    one column per model, ``rules`` (the baseline) first."""
    names = list(results)
    heads = ["", *names]
    summary = [[m, *(_pct(*results[n]["all"].ratio(m)) for n in names)] for m in SUMMARY]
    summary += [[m, *(results[n]["all"].counts[m] for n in names)] for m in COUNTS]
    rate = [_per_minute(results[n]["all"].ratio("files ok")[0], seconds.get(n)) for n in names]
    summary.append(["files ok / minute", *rate])
    per_kind = [
        [k, *(_pct(*results[n]["all"].ratio(f"kind: {k}")) for n in names)] for k in KINDS_OF_FIELD
    ]
    kinds = sorted(k for k in results[names[0]] if k != "all")
    per_doc = [[k, *(_pct(*results[n][k].ratio("fields right")) for n in names)] for k in kinds]
    return "\n\n".join(
        [
            table(heads, summary),
            table(["fields right, by field kind", *names], per_kind),
            table(["fields right, by document kind", *names], per_doc),
        ]
    )


def failures(records: dict[str, dict[str, dict]]) -> str:
    """One line per failed (or missing) file: model, document, the error's first line."""
    lines = []
    for name, by_doc in records.items():
        for doc, record in sorted(by_doc.items()):
            if not record.get("ok"):
                error = (record.get("error") or "").splitlines() or ["no record"]
                lines.append(f"- {name}: {doc}: {error[0]}")
    return "\n".join(["failed files:", *lines]) if lines else "failed files: none"


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    own, flags = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])  # fmt: skip
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--split", choices=["dev", "heldout"], default="dev")
    p.add_argument("--models", nargs="+", default=["rules", "embedded"])
    p.add_argument("--kinds", nargs="+", default=None, help="document kinds (default: all)")
    p.add_argument("--numbers", nargs="+", default=None, help="document numbers (14 15 ...)")
    p.add_argument("--records", type=Path, default=None, help="keep results files here")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument(
        "--score-only", action="store_true", help="score the records under --records, run nothing"
    )
    args = p.parse_args(own)
    if args.score_only and not args.records:
        p.error("--score-only needs --records DIR")
    docs = split_docs(args.split, args.kinds, args.numbers)
    records, seconds = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        root = args.records or Path(tmp)
        for name in args.models:
            folder = root / Path(name).name
            if args.score_only:
                records[name] = read_records(docs, folder)
                continue
            folder.mkdir(parents=True, exist_ok=True)
            records[name], seconds[name] = extract(name, docs, folder, flags, args.threads)
            print(f"{name}: {len(records[name])} records, {seconds[name]:.0f} s", file=sys.stderr)
    results = {name: score(docs, by_doc) for name, by_doc in records.items()}
    print(f"split {args.split}: {len(docs)} documents; extract flags: {flags or 'defaults'}\n")
    print(result_tables(results, seconds))
    print("\n" + failures({n: {d: by.get(d, {}) for d in docs} for n, by in records.items()}))


if __name__ == "__main__":
    main()
