"""A run journaled by an older version (schema 1) still resumes: exactly once, nothing paid twice.

The fixture (tests/fixtures/journal-v1, see its README) is a crashed run of a 12-task job on the
embedded simulator: 7 tasks succeeded, task 0 failed finally (a scripted 500, 2 attempts), 4
were in flight when the process was killed. Its stored profile is `sim`, so `resume` starts the
embedded simulator on loopback with the stored simulator config.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

from tests.conftest import read_jsonl, run_cli

FIXTURE = Path(__file__).parent / "fixtures" / "journal-v1" / "journal.sqlite"
ALL_IDS = [f"task-{i:04d}" for i in range(12)]
SUCCEEDED = {1, 3, 5, 6, 9, 10, 11}
FAILED = {0}
UNFINISHED = {2, 4, 7, 8}


def journal_view(path: Path) -> tuple[dict[int, str], Counter]:
    """(state by task, attempts journaled per task), read as another process would."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        states = dict(db.execute("SELECT idx, state FROM tasks"))
        attempts = Counter(idx for (idx,) in db.execute("SELECT idx FROM attempts"))
        return states, attempts
    finally:
        db.close()


def test_resume_of_a_schema_1_journal_finishes_the_run_exactly_once(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    shutil.copyfile(FIXTURE, run_dir / "journal.sqlite")
    states_before, attempts_before = journal_view(run_dir / "journal.sqlite")
    # the fixture is what its README says (else the assertions below prove nothing)
    assert {i for i, s in states_before.items() if s == "succeeded"} == SUCCEEDED
    assert {i for i, s in states_before.items() if s == "failed"} == FAILED
    assert {i for i, s in states_before.items() if s not in ("succeeded", "failed")} == UNFINISHED
    assert attempts_before == Counter({0: 2, **{i: 1 for i in SUCCEEDED}})

    result = run_cli("resume", str(run_dir), "--headless")

    assert "Traceback" not in result.stderr, result.stderr
    # the failed task is finished work: a plain resume leaves it failed, so the run ends with a failure
    assert result.returncode == 1, result.stderr
    states_after, attempts_after = journal_view(run_dir / "journal.sqlite")
    assert states_after == {i: ("failed" if i in FAILED else "succeeded") for i in range(12)}
    for index in SUCCEEDED | FAILED:
        assert attempts_after[index] == attempts_before[index], f"task {index} was sent again"
    for index in UNFINISHED:
        assert attempts_after[index] == 1, f"task {index}: {attempts_after[index]} attempts"

    results = read_jsonl(run_dir / "results.jsonl")
    errors = read_jsonl(run_dir / "errors.jsonl")
    ids = Counter(line["custom_id"] for line in results + errors)
    assert ids == Counter(ALL_IDS)
    assert [line["custom_id"] for line in errors] == ["task-0000"]
    assert errors[0]["error"]["code"] is not None
    for line in results:  # old successes are written from the journal, new ones from this session
        index = int(line["custom_id"].removeprefix("task-"))
        content = line["response"]["body"]["choices"][0]["message"]["content"]
        assert line["response"]["status_code"] == 200
        assert content.startswith(f"Sim answer to: old journal task {index}"), content
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["total"], summary["succeeded"], summary["failed"]) == (12, 11, 1)


def test_a_schema_1_journal_gets_its_event_log_when_resumed_and_reads_the_same_attached(tmp_path):
    from swarm_tui.frontend.attached import AttachedRun
    from swarm_tui.journal import SCHEMA_VERSION, Journal
    from swarm_tui.journal.migrate import JournalFollower
    from swarm_tui.view.follower import LogFollower

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    shutil.copyfile(FIXTURE, run_dir / "journal.sqlite")
    before = AttachedRun(run_dir)  # read-only, as it is: through the old follower
    before.poll()
    assert isinstance(before.follower, JournalFollower)
    assert before.stats.succeeded == len(SUCCEEDED) and before.stats.failed == len(FAILED)

    assert run_cli("resume", str(run_dir), "--headless").returncode == 1

    journal = Journal.open(run_dir, readonly=True)
    try:
        assert journal.history.has_log() and journal.queries.meta()["schema"] == SCHEMA_VERSION
    finally:
        journal.close()
    after = AttachedRun(run_dir)  # now through the log: the old sessions rebuilt once, the new one logged
    after.poll()
    assert isinstance(after.follower, LogFollower)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (after.stats.succeeded, after.stats.failed) == (summary["succeeded"], summary["failed"]) == (11, 1)
    assert after.stats.sent == summary["requests"]["sent"]
    assert not [i for i, s in after.states.items() if s.value == "running"]
    for view in (before, after):
        view.journal.close()


def test_the_readers_of_a_run_read_a_schema_1_journal_bringing_it_up_to_date_and_nothing_else(tmp_path):
    """export, report and ctl read this version's tables and log: a journal an older version wrote
    is brought up to date first, as a resume would (they ended in a traceback: no table
    `tool_calls`, no table `log`); the run itself (its tasks and attempts) is untouched."""
    from swarm_tui.journal import SCHEMA_VERSION

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    shutil.copyfile(FIXTURE, run_dir / "journal.sqlite")
    before = journal_view(run_dir / "journal.sqlite")

    status = run_cli("ctl", str(run_dir), "status", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["counts"]["succeeded"] == len(SUCCEEDED)
    exported = run_cli("export", str(run_dir))
    assert exported.returncode == 0, exported.stderr
    assert len(read_jsonl(run_dir / "results.jsonl")) == len(SUCCEEDED)
    report = run_cli("report", str(run_dir), "-o", str(tmp_path / "report.html"))
    assert report.returncode == 0 and "Traceback" not in report.stderr, report.stderr

    assert journal_view(run_dir / "journal.sqlite") == before
    db = sqlite3.connect(run_dir / "journal.sqlite")
    try:
        assert db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()[0] == str(SCHEMA_VERSION)
    finally:
        db.close()
