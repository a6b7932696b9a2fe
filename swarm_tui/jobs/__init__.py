"""Job files: what a swarm is asked to do.

Two formats, chosen by extension:

* ``.jsonl`` — the OpenAI Batch API input format, one request a line (``batch_jsonl``).
* ``.toml``  — a swarm job: a system template, optional shared context sent first and
  identical for every agent (so provider prefix caches hit), and tasks given as a list or as
  ``count`` + a prompt template (``swarm_toml``, its tasks and templates in ``toml_tasks``).

A job is validated whole before anything is sent: every problem is collected with its file,
line and field, and a job with any problem raises `InputError` (the CLI exits 2).

    job.py           Job and TaskTemplate (how a prompt becomes a request), the limits of a job
    chat_checks.py   what the chat-completions API would refuse in a body, before a token is billed
    batch_jsonl.py   loading a Batch JSONL job
    swarm_toml.py    loading a TOML swarm job, and a `--tools` file
    toml_checks.py   collecting a TOML file's problems, each located at its line
    toml_tasks.py    a TOML job's tasks: `[tasks]` count + template or `[[task]]`, rendered safely
"""

from __future__ import annotations

from pathlib import Path

from swarm_tui.core.errors import InputError
from swarm_tui.jobs.batch_jsonl import load_batch_jsonl
from swarm_tui.jobs.job import MAX_PROBLEMS, MAX_TASKS, Job, TaskTemplate
from swarm_tui.jobs.swarm_toml import load_swarm_toml, load_tools_file

__all__ = ["Job", "TaskTemplate", "load_job", "load_tools_file", "MAX_PROBLEMS", "MAX_TASKS"]


def load_job(path: str | Path, *, model_override: str | None = None) -> Job:
    """Load and validate a job file; raise `InputError` listing every problem found."""
    path = Path(path)
    if not path.exists():
        raise InputError.single(path, "job", "file not found")
    if path.is_dir():
        raise InputError.single(path, "job", "is a directory, not a job file")
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return load_batch_jsonl(path, model_override=model_override)
    if suffix == ".toml":
        return load_swarm_toml(path, model_override=model_override)
    raise InputError.single(
        path, "job", f"unknown job format {path.suffix!r}: use .jsonl (OpenAI Batch) or .toml (swarm job)"
    )
