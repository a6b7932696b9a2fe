"""Job files: what a swarm is asked to do.

Chosen by extension:

* ``.jsonl`` — the OpenAI Batch API input format, one request a line (``batch_jsonl``); a file of
  plain records (no ``custom_id`` and ``body`` on its first line) is a table.
* ``.toml``  — a swarm job: a system template, optional shared context sent first and
  identical for every agent (so provider prefix caches hit), and tasks given as a list, as
  ``count`` + a prompt template, or as a table's rows (``[tasks] from = "data.parquet"``)
  (``swarm_toml``, its tasks and templates in ``toml_tasks``).
* ``.csv``, ``.parquet``, a record-per-line ``.jsonl`` and a Hugging Face dataset directory
  (``save_to_disk``) — a table: each row a task, its prompt a template over the columns
  (``--prompt``; ``tables``, its files read by ``table_files``, with the ``data`` extra).

A job is validated whole before anything is sent: every problem is collected with its file,
line and field, and a job with any problem raises `InputError` (the CLI exits 2).

    job.py           Job and TaskTemplate (how a prompt becomes a request), the limits of a job
    chat_checks.py   what the chat-completions API would refuse in a body, before a token is billed
    batch_jsonl.py   loading a Batch JSONL job
    swarm_toml.py    loading a TOML swarm job, and a `--tools` file
    toml_checks.py   collecting a TOML file's problems, each located at its line
    toml_tasks.py    a TOML job's tasks: `[tasks]` count + template or `[[task]]`, rendered safely
    tables.py        a table job: rows checked whole, rendered into tasks, kept beside them
    table_files.py   reading CSV, Parquet, record JSONL and dataset directories a batch at a time
"""

from __future__ import annotations

from pathlib import Path

from swarm_tui.core.errors import InputError
from swarm_tui.jobs.batch_jsonl import load_batch_jsonl
from swarm_tui.jobs.job import MAX_PROBLEMS, MAX_TASKS, Job, TaskTemplate
from swarm_tui.jobs.swarm_toml import load_swarm_toml, load_tools_file
from swarm_tui.jobs.table_files import is_batch_jsonl, is_dataset_dir, open_table
from swarm_tui.jobs.tables import TableSpec, load_table

__all__ = ["Job", "TableSpec", "TaskTemplate", "load_job", "load_tools_file", "MAX_PROBLEMS", "MAX_TASKS"]


def load_job(path: str | Path, *, model_override: str | None = None, table: TableSpec | None = None) -> Job:
    """Load and validate a job file; raise `InputError` listing every problem found. `table`: the
    templates that make a table's rows into tasks (`--prompt`, `--system`, `--id`)."""
    path = Path(path)
    if not path.exists():
        raise InputError.single(path, "job", "file not found")
    suffix = path.suffix.lower()
    records = suffix == ".jsonl" and not is_batch_jsonl(path)
    if records or suffix in (".csv", ".parquet") or is_dataset_dir(path):
        return _table_job(path, model_override, table)
    if table is not None:
        flag = table.labels[0]
        what = "a Batch JSONL job (each line holds its request)" if suffix == ".jsonl" else "not a table"
        raise InputError.single(path, flag, f"{flag} makes a table's rows into tasks; {path.name} is {what}")
    if path.is_dir():
        raise InputError.single(path, "job", "is a directory, not a job file (nor a dataset saved with save_to_disk)")
    if suffix == ".jsonl":
        return load_batch_jsonl(path, model_override=model_override)
    if suffix == ".toml":
        return load_swarm_toml(path, model_override=model_override)
    raise InputError.single(
        path,
        "job",
        f"unknown job format {path.suffix!r}: use .jsonl (OpenAI Batch), .toml (swarm job), or a table "
        "(.csv, .parquet, a .jsonl of records, a dataset directory) with --prompt",
    )


def _table_job(path: Path, model: str | None, spec: TableSpec | None) -> Job:
    """A table's rows as a job: `spec` says what to ask of each row, `model` whom."""
    if spec is None:
        names = ", ".join(open_table(path).names[:8]) or "its keys"
        example = '--prompt "Classify: {text}"'
        raise InputError.single(
            path, "--prompt", f"a table: say what to ask of each row, e.g. {example} (columns: {names})"
        )
    if not model:
        raise InputError.single(path, "--model", "a table names no model: pass --model (or a profile that names one)")
    tasks, rows = load_table(path, spec, TaskTemplate(model=model))
    name = path.name if path.is_dir() else path.stem
    return Job(name=name, source=str(path), tasks=tasks, model=model, table=rows)
