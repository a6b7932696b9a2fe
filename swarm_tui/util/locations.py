"""Where the files that ship with swarm-tui live, installed or in a source checkout."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent
"""The installed `swarm_tui` package (this module is in its `util`)."""


def bundled(folder: str) -> Path:
    """`sample_jobs` or `themes`: inside the wheel under `_bundled/`, else at the repository root."""
    installed = _PACKAGE / "_bundled" / folder
    return installed if installed.is_dir() else _PACKAGE.parent / folder


def demo_job() -> Path:
    return bundled("sample_jobs") / "swarm-100.toml"
