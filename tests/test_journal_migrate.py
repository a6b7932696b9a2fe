"""Journals of older schemas and the one event log: their untyped notes (the `events` table of
schemas 1 and 2) become typed events in the log when the run is resumed, and read as those
events, unchanged on disk, when the journal is only read.

The schema-2 fixture (tests/fixtures/journal-v2, see its README) is a real run made by the
version before: 40 tasks, the primary went down after 10 answers (one failover to the
fallback), aborted after 25; so 15 are unfinished and its `events` table holds a `session`
and a `failover` row."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from swarm_tui.core.events import EndpointSwitched
from swarm_tui.core.notes import JudgeFailed, MemoryFlushed
from swarm_tui.core.task import Task
from swarm_tui.engine import EngineSettings
from swarm_tui.journal import SCHEMA_VERSION, Journal
from swarm_tui.judge.judge import quality_summary
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.run.outputs import failovers
from swarm_tui.run.session import SwarmSession

FIXTURES = Path(__file__).parent / "fixtures"


def read(path: Path, sql: str) -> list[tuple]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def copy_fixture(tmp_path: Path, name: str) -> Path:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    shutil.copyfile(FIXTURES / name / "journal.sqlite", run_dir / "journal.sqlite")
    return run_dir


async def test_a_schema_2_run_resumed_keeps_its_failover_as_a_typed_event(tmp_path, sim_factory):
    run_dir = copy_fixture(tmp_path, "journal-v2")
    path = run_dir / "journal.sqlite"
    # the fixture is what its README says (else the assertions below prove nothing)
    assert read(path, "SELECT value FROM meta WHERE key = 'schema'") == [("2",)]
    old_rows = read(path, "SELECT at, session, kind, data FROM events ORDER BY id")
    assert [(session, kind) for _, session, kind, _ in old_rows] == [(1, "session"), (1, "failover")]
    old_failover = json.loads(old_rows[1][3])
    assert old_failover["to"] == "custom/fallback" and old_failover["from_primary"] is True
    assert dict(read(path, "SELECT state, COUNT(*) FROM tasks GROUP BY state")) == {"succeeded": 25, "cancelled": 15}

    readonly = Journal.open(run_dir, readonly=True)  # read as it is: its notes as their events
    try:
        assert [(f.to, f.reason, f.from_primary) for f in failovers(readonly)] == [
            (old_failover["to"], old_failover["reason"], True)
        ]
    finally:
        readonly.close()
    assert read(path, "SELECT value FROM meta WHERE key = 'schema'") == [("2",)]  # nothing written

    primary, fallback = sim_factory(latency_ms=5.0), sim_factory(latency_ms=5.0)
    profile = ProviderProfile("custom", base_url=primary.base_url, fallback_base_url=fallback.base_url)
    session = SwarmSession.reopen(run_dir, profile=profile, settings=EngineSettings.of(concurrency=4))
    try:
        finished = await session.run()
    finally:
        await session.aclose()
    assert (finished.succeeded, finished.failed) == (40, 0)

    assert read(path, "SELECT value FROM meta WHERE key = 'schema'") == [(str(SCHEMA_VERSION),)]
    assert read(path, "SELECT name FROM sqlite_master WHERE name = 'events'") == []
    assert read(path, "SELECT session FROM log WHERE kind = 'SessionStarted' ORDER BY seq") == [(1,), (2,)]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert len(summary["failovers"]) == 1  # the old one; this session stayed on its primary
    switch = summary["failovers"][0]
    assert {k: switch[k] for k in ("to", "reason", "from_primary")} == old_failover
    assert abs(switch["at"] - old_rows[1][0]) < 1.0  # logged with the switch, in the same turn


def old_journal_with_notes(tmp_path: Path) -> Path:
    """A journal as a schema-2 version left it: its notes in an `events` table."""
    journal = Journal.create(tmp_path / "run", [Task(0, "t0", {}), Task(1, "t1", {})], {"plan": {}, "job": {}})
    journal.close()
    path = tmp_path / "run" / "journal.sqlite"
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE events (id INTEGER PRIMARY KEY, at REAL NOT NULL, session INTEGER NOT NULL, "
        "kind TEXT NOT NULL, data TEXT)"
    )
    db.executemany(
        "INSERT INTO events (at, session, kind, data) VALUES (?, ?, ?, ?)",
        [
            (10.0, 1, "session", '{"pid": 7}'),
            (11.0, 1, "judge_failed", '{"index": 0, "error": "timeout"}'),
            (12.0, 1, "memory_flushed", '{"rounds": 2}'),
            (13.0, 1, "quality_drift", '{"rolling": 4.0}'),  # its QualityDrift is in the log already
            (14.0, 3, "session", '{"pid": 8}'),
            (15.0, 3, "a kind no version knows", None),
        ],
    )
    db.execute("UPDATE meta SET value = '2' WHERE key = 'schema'")
    db.commit()
    db.close()
    return path


def test_old_notes_read_as_events_then_become_them_once(tmp_path):
    path = old_journal_with_notes(tmp_path)
    readonly = Journal.open(tmp_path / "run", readonly=True)
    try:
        assert quality_summary(readonly)["judge_errors"] == 1
        assert [e for _, e in readonly.history.logged(MemoryFlushed)] == [MemoryFlushed(2)]
    finally:
        readonly.close()

    journal = Journal.open(tmp_path / "run")
    assert journal.begin_session() == 4  # after the old sessions (1 and 3), not after the log's
    assert journal.history.old_events() == [] and journal.queries.meta()["schema"] == SCHEMA_VERSION
    assert [(at, e) for at, e in journal.history.logged(JudgeFailed, MemoryFlushed)] == [
        (11.0, JudgeFailed(0, "timeout")),
        (12.0, MemoryFlushed(2)),
    ]
    sessions = read(path, "SELECT session, data FROM log WHERE kind = 'SessionStarted' ORDER BY seq")
    assert [session for session, _ in sessions] == [1, 3, 4]
    assert [json.loads(data)["pid"] for _, data in sessions[:2]] == [7, 8]
    assert journal.history.logged(EndpointSwitched) == []
    journal.close()
    again = Journal.open(tmp_path / "run")
    assert again.begin_session() == 5  # migrated once: nothing left to migrate
    assert len(again.history.logged(JudgeFailed)) == 1
    again.close()


def test_a_schema_1_journal_keeps_its_session_numbers_in_the_rebuilt_log(tmp_path):
    run_dir = copy_fixture(tmp_path, "journal-v1")
    journal = Journal.open(run_dir)
    try:
        assert journal.begin_session() == 2  # the fixture's run was session 1
        assert journal.queries.meta()["schema"] == SCHEMA_VERSION and journal.history.old_events() == []
        assert read(
            run_dir / "journal.sqlite", "SELECT session FROM log WHERE kind = 'SessionStarted' ORDER BY seq"
        ) == [(1,), (2,)]
        assert journal.history.run_ended() is False  # killed mid-run: the rebuilt log says so, as before
    finally:
        journal.close()
