"""One path for a run: the command line becomes a request, the request a plan, the plan passes one
preflight that says every problem at once, and the session opens the plan. A resume opens its
journal once, reads its meta once and migrates an older journal once; a refused one leaves the
run as it was."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from swarm_tui.cli import main
from swarm_tui.journal import Journal, store
from swarm_tui.records import RunMeta
from swarm_tui.run.directory import lock_holder

from tests.conftest import run_cli, write_batch

FIXTURES = Path(__file__).parent / "fixtures"


def test_two_independent_problems_of_one_command_line_are_said_at_once(tmp_path, monkeypatch):
    job = write_batch(tmp_path / "job.jsonl", ["a", "b"], model="a-model-no-table-prices")
    monkeypatch.delenv("NO_SUCH_KEY_VARIABLE", raising=False)
    out = tmp_path / "run"
    result = run_cli(
        "run",
        str(job),
        "--headless",
        "--out",
        str(out),
        "--base-url",
        "https://api.example.com/v1",
        "--api-key-env",
        "NO_SUCH_KEY_VARIABLE",
        "--budget",
        "1",
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "NO_SUCH_KEY_VARIABLE" in result.stderr, "the missing key is said"
    assert "--budget: budget: no price is known for model 'a-model-no-table-prices'" in result.stderr, (
        "and the budget that cannot be held, in the same refusal"
    )
    assert not out.exists(), "nothing written"


@pytest.fixture
def old_run(tmp_path) -> Path:
    """A copy of the schema-1 fixture: a crashed run whose journal predates the event log."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    shutil.copyfile(FIXTURES / "journal-v1" / "journal.sqlite", run_dir / "journal.sqlite")
    return run_dir


def sessions_logged(run_dir: Path) -> list[tuple]:
    db = sqlite3.connect(f"file:{run_dir / 'journal.sqlite'}?mode=ro", uri=True)
    try:
        if not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'log'").fetchone():
            return []
        return db.execute("SELECT session FROM log WHERE kind = 'SessionStarted'").fetchall()
    finally:
        db.close()


def test_a_resume_opens_its_journal_once_reads_its_meta_once_and_migrates_once(old_run, monkeypatch):
    counts = {"open": 0, "meta": 0, "migrate": 0}
    real_open, real_meta, real_migrate = Journal.open.__func__, RunMeta.from_meta.__func__, store.migrate

    def counted(name, real):
        def call(*args, **kwargs):
            counts[name] += 1
            return real(*args, **kwargs)

        return call

    monkeypatch.setattr(Journal, "open", classmethod(counted("open", real_open)))
    monkeypatch.setattr(RunMeta, "from_meta", classmethod(counted("meta", real_meta)))
    monkeypatch.setattr(store, "migrate", counted("migrate", real_migrate))

    code = main(["resume", str(old_run), "--headless", "--sim-latency-ms", "5"])

    assert code == 1, "its failed task stays failed: the run ends with a failure"
    assert counts == {"open": 1, "meta": 1, "migrate": 1}
    assert [session for (session,) in sessions_logged(old_run)] == [1, 2], "the old session rebuilt, this one logged"


def test_a_refused_resume_leaves_the_run_as_it_was(old_run, monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY_VARIABLE", raising=False)
    result = run_cli(
        "resume",
        str(old_run),
        "--headless",
        "--base-url",
        "https://api.example.com/v1",
        "--api-key-env",
        "NO_SUCH_KEY_VARIABLE",
        "--max-price",
        "1",
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "--route: provider: a route needs two or more providers" in result.stderr
    key_flags = ["--base-url", "https://api.example.com/v1", "--api-key-env", "NO_SUCH_KEY_VARIABLE"]
    result = run_cli("resume", str(old_run), "--headless", *key_flags)
    assert result.returncode == 2 and "NO_SUCH_KEY_VARIABLE" in result.stderr, result.stderr
    assert sessions_logged(old_run) == [], "no session begun: the old journal not migrated"
    assert not (old_run / "results.jsonl").exists()
    assert lock_holder(old_run) is None, "the lock released"
    db = sqlite3.connect(f"file:{old_run / 'journal.sqlite'}?mode=ro", uri=True)
    try:
        assert db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone() == ("1",)
        states = dict(db.execute("SELECT state, COUNT(*) FROM tasks GROUP BY state"))
    finally:
        db.close()
    assert states == {"succeeded": 7, "failed": 1, "queued": 4}, "the crashed run as its README says"
