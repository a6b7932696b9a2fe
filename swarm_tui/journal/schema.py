"""The journal's tables, and what a journal made by an earlier version is given on opening.

The `log` is the run's one event log (every event, typed, `core.codec`); the other tables are
its projections (`journal.projections`), kept in the same transaction as the events that write
them, so that reading a task's state or answer needs no replay. `control` is the queue another
process (`attach`, `ctl`) steers the run through; `meta` holds the job, the plan and the heartbeat.
"""

from __future__ import annotations

from swarm_tui.journal.connection import MaskedConnection

JOURNAL_NAME = "journal.sqlite"
"""The journal's file in its run directory."""

SCHEMA_VERSION = 5
"""1: tasks, attempts, results, run events. 2: the engine's event log (`log`), which views replay.
3: the run's notes (a failover, a trimmed request, the planner's sub-tasks...) are typed events
in the log; the untyped `events` table is gone (`journal.migrate` turns its rows into events).
4: an attempt's `saved_usd` (a replay from the response cache: what the original call cost).
A task's `row` (a table job's input row, JSON, for the export; NULL for other jobs) came later
in version 4: a journal made before it has the column added empty on opening; so did a control
command's `result` (what the session did with it, which `ctl` reads back), and a task's ancestry
(`parent`, `depth`, and `spawn`: the tool call of its parent that added it, JSON), for the agents
an orchestrator spawns: NULL, 0 and NULL for every other task.
5: a streamed attempt's `tokens_per_s` and `gap_ms` (its mean time between two chunks), and a
result's `parsed` (the answer's JSON value as the job's checks read it: results.jsonl's)."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tasks (
    idx INTEGER PRIMARY KEY,
    custom_id TEXT NOT NULL UNIQUE,
    body TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    updated_at REAL,
    row TEXT,
    parent INTEGER,
    depth INTEGER NOT NULL DEFAULT 0,
    spawn TEXT
);
CREATE TABLE IF NOT EXISTS attempts (
    id INTEGER PRIMARY KEY,
    idx INTEGER NOT NULL REFERENCES tasks(idx),
    number INTEGER NOT NULL,
    session INTEGER NOT NULL,
    endpoint TEXT NOT NULL,
    started_at REAL NOT NULL,
    latency_ms REAL NOT NULL,
    ttft_ms REAL,
    outcome TEXT NOT NULL,
    retry_in_s REAL,
    status INTEGER,
    error_class TEXT,
    error_code TEXT,
    error_message TEXT,
    request_id TEXT,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    cached_tokens INTEGER NOT NULL DEFAULT 0,
    reasoning_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL,
    estimated INTEGER NOT NULL DEFAULT 0,
    finish_reason TEXT,
    saved_usd REAL,
    tokens_per_s REAL,
    gap_ms REAL
);
CREATE INDEX IF NOT EXISTS attempts_by_task ON attempts(idx);
CREATE TABLE IF NOT EXISTS results (
    idx INTEGER PRIMARY KEY REFERENCES tasks(idx),
    ok INTEGER NOT NULL,
    request_id TEXT,
    response TEXT,
    error TEXT,
    finished_at REAL NOT NULL,
    parsed TEXT
);
CREATE TABLE IF NOT EXISTS log (
    seq INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    session INTEGER NOT NULL,
    kind TEXT NOT NULL,
    data TEXT
);
CREATE TABLE IF NOT EXISTS tool_calls (
    id INTEGER PRIMARY KEY,
    idx INTEGER NOT NULL REFERENCES tasks(idx),
    step INTEGER NOT NULL,
    call_id TEXT NOT NULL,
    name TEXT NOT NULL,
    arguments TEXT,
    result TEXT,
    ok INTEGER NOT NULL,
    latency_ms REAL NOT NULL,
    finished_at REAL NOT NULL,
    UNIQUE (idx, call_id)
);
CREATE TABLE IF NOT EXISTS batches (
    id INTEGER PRIMARY KEY,
    endpoint TEXT NOT NULL,
    input_file_id TEXT NOT NULL,
    batch_id TEXT,
    status TEXT NOT NULL,
    tasks TEXT NOT NULL,
    submitted_at REAL NOT NULL,
    ended_at REAL,
    output_file_id TEXT,
    error_file_id TEXT,
    counts TEXT
);
CREATE TABLE IF NOT EXISTS judgments (
    idx INTEGER PRIMARY KEY,
    score REAL NOT NULL,
    reason TEXT NOT NULL,
    round INTEGER NOT NULL,
    at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS control (
    id INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    command TEXT NOT NULL,
    args TEXT,
    taken_at REAL,
    result TEXT
);
"""

OLD_EVENTS_TABLE = "events"
"""The untyped notes of schemas 1 and 2 (id, at, session, kind, data JSON): read only to migrate
them (`journal.migrate`), or to read an old journal that cannot be written."""

ADDED_COLUMNS = (
    ("attempts", "estimated", "INTEGER NOT NULL DEFAULT 0"),
    ("attempts", "finish_reason", "TEXT"),
    ("attempts", "saved_usd", "REAL"),
    ("results", "parsed", "TEXT"),
    ("tasks", "row", "TEXT"),
    ("control", "result", "TEXT"),
    ("tasks", "parent", "INTEGER"),
    ("tasks", "depth", "INTEGER NOT NULL DEFAULT 0"),
    ("tasks", "spawn", "TEXT"),
    ("attempts", "tokens_per_s", "REAL"),
    ("attempts", "gap_ms", "REAL"),
)
"""Columns later versions added to a table: a journal made before them gets them on opening."""


def add_missing_columns(db: MaskedConnection) -> None:
    """Give a journal opened for writing the columns its version did not have (`ADDED_COLUMNS`)."""
    for table, column, declaration in ADDED_COLUMNS:
        have = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        if column not in have:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
