"""The journal: a run's source of truth, in SQLite (WAL) inside the run directory.

Every attempt is written (failed, retried and cancelled ones too: they may be billed), and a
task's final result is committed in the same transaction as its state, before any listener
hears of it. So whatever instant the process dies at, the journal says exactly which tasks
succeeded, and `resume` never sends those again.

`synchronous=NORMAL` in WAL mode: a commit survives the process being killed (the OS has the
pages); only a power cut can lose the last transactions, and then they are simply re-sent.

The journal also carries a small `control` queue so that another process (`attach`) can ask
the running engine to pause, resume, retry or abort, and a heartbeat so it can tell whether
anyone is running the journal at all.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

from .engine.events import Attempt, TaskState
from .jobs import Task
from .providers.errors import CallError, ErrorClass, error_body
from .providers.usage import Usage

JOURNAL_NAME = "journal.sqlite"
SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tasks (
    idx INTEGER PRIMARY KEY,
    custom_id TEXT NOT NULL UNIQUE,
    body TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    updated_at REAL
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
    cost_usd REAL
);
CREATE INDEX IF NOT EXISTS attempts_by_task ON attempts(idx);
CREATE TABLE IF NOT EXISTS results (
    idx INTEGER PRIMARY KEY REFERENCES tasks(idx),
    ok INTEGER NOT NULL,
    request_id TEXT,
    response TEXT,
    error TEXT,
    finished_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    session INTEGER NOT NULL,
    kind TEXT NOT NULL,
    data TEXT
);
CREATE TABLE IF NOT EXISTS control (
    id INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    command TEXT NOT NULL,
    args TEXT,
    taken_at REAL
);
"""


@dataclass(frozen=True)
class TaskRow:
    index: int
    custom_id: str
    body: dict[str, Any]
    state: TaskState
    attempts: int


class Journal:
    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self.path = Path(path)
        if readonly:
            self._db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
        else:
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(SCHEMA)
        self._db.execute("PRAGMA busy_timeout=5000")
        self.session = 0

    # ----------------------------------------------------------------- lifecycle

    @classmethod
    def create(cls, run_dir: Path, tasks: list[Task], meta: dict[str, Any]) -> "Journal":
        """A new journal holding every task of the job (bodies included: resume needs no job file)."""
        run_dir.mkdir(parents=True, exist_ok=True)
        path = run_dir / JOURNAL_NAME
        if path.exists():
            raise FileExistsError(f"{run_dir} already holds a run; use `swarm-tui resume {run_dir}`")
        journal = cls(path)
        now = time.time()
        with journal._transaction():
            journal._db.executemany(
                "INSERT INTO tasks (idx, custom_id, body, state, updated_at) VALUES (?, ?, ?, ?, ?)",
                ((t.index, t.custom_id, json.dumps(t.body, ensure_ascii=False), TaskState.QUEUED, now) for t in tasks),
            )
            journal._db.executemany(
                "INSERT INTO meta (key, value) VALUES (?, ?)",
                [(k, json.dumps(v, ensure_ascii=False)) for k, v in {**meta, "schema": SCHEMA_VERSION,
                                                                      "created_at": now}.items()],
            )
        return journal

    def add_tasks(self, tasks: Iterable[Task]) -> None:
        with self._transaction():
            self._db.executemany(
                "INSERT OR IGNORE INTO tasks (idx, custom_id, body, state, updated_at) VALUES (?, ?, ?, ?, ?)",
                ((t.index, t.custom_id, json.dumps(t.body, ensure_ascii=False), TaskState.QUEUED, time.time())
                 for t in tasks),
            )

    @classmethod
    def open(cls, run_dir: Path, *, readonly: bool = False) -> "Journal":
        path = Path(run_dir) / JOURNAL_NAME
        if not path.exists():
            raise FileNotFoundError(f"no journal in {run_dir} (expected {path.name})")
        return cls(path, readonly=readonly)

    def begin_session(self) -> int:
        """Number this process's work on the journal (1 for the first run, 2 for its first resume...)."""
        row = self._db.execute("SELECT COALESCE(MAX(session), 0) + 1 FROM events").fetchone()
        self.session = row[0]
        self.log_event("session", {"pid": os.getpid()})
        return self.session

    def close(self) -> None:
        self._db.close()

    # ----------------------------------------------------------------- reading

    def meta(self) -> dict[str, Any]:
        return {k: json.loads(v) for k, v in self._db.execute("SELECT key, value FROM meta")}

    def set_meta(self, key: str, value: Any) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                         (key, json.dumps(value, ensure_ascii=False)))

    def tasks(self) -> list[TaskRow]:
        return [
            TaskRow(idx, cid, json.loads(body), TaskState(state), attempts)
            for idx, cid, body, state, attempts in self._db.execute(
                "SELECT idx, custom_id, body, state, attempts FROM tasks ORDER BY idx")
        ]

    def states(self) -> dict[int, TaskState]:
        return {idx: TaskState(state) for idx, state in self._db.execute("SELECT idx, state FROM tasks")}

    def counts(self) -> dict[str, int]:
        return dict(self._db.execute("SELECT state, COUNT(*) FROM tasks GROUP BY state").fetchall())

    def attempts_of(self, index: int) -> list[dict[str, Any]]:
        cursor = self._db.execute("SELECT * FROM attempts WHERE idx = ? ORDER BY id", (index,))
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row)) for row in cursor]

    def attempts_since(self, last_id: int) -> list[dict[str, Any]]:
        cursor = self._db.execute("SELECT * FROM attempts WHERE id > ? ORDER BY id", (last_id,))
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row)) for row in cursor]

    def result_of(self, index: int) -> dict[str, Any] | None:
        row = self._db.execute("SELECT ok, request_id, response, error FROM results WHERE idx = ?", (index,)).fetchone()
        if row is None:
            return None
        ok, request_id, response, error = row
        return {"ok": bool(ok), "request_id": request_id,
                "response": json.loads(response) if response else None,
                "error": json.loads(error) if error else None}

    def iter_results(self) -> Iterator[tuple[str, bool, str | None, dict | None, dict | None]]:
        """(custom_id, ok, request_id, response body, error) for every finished task, in task order."""
        for cid, ok, request_id, response, error in self._db.execute(
            "SELECT t.custom_id, r.ok, r.request_id, r.response, r.error FROM results r "
            "JOIN tasks t ON t.idx = r.idx ORDER BY r.idx"
        ):
            yield cid, bool(ok), request_id, json.loads(response) if response else None, (
                json.loads(error) if error else None)

    def attempt_totals(self) -> dict[str, Any]:
        row = self._db.execute(
            "SELECT COUNT(*), SUM(outcome = 'retry'), SUM(error_class = ?), SUM(error_class = ?), "
            "SUM(error_class = ?), COALESCE(SUM(prompt_tokens), 0), COALESCE(SUM(completion_tokens), 0), "
            "COALESCE(SUM(cached_tokens), 0), COALESCE(SUM(reasoning_tokens), 0), SUM(cost_usd), "
            "SUM(cost_usd IS NULL AND prompt_tokens + completion_tokens > 0), MIN(started_at), "
            "MAX(started_at + latency_ms / 1000.0) FROM attempts",
            (ErrorClass.RATE_LIMIT, ErrorClass.SERVER, ErrorClass.TIMEOUT),
        ).fetchone()
        keys = ("sent", "retried", "rate_limited", "server_errors", "timeouts", "prompt", "completion", "cached",
                "reasoning", "cost_usd", "unpriced", "first_started", "last_ended")
        return {k: (v or 0) if k not in ("cost_usd", "first_started", "last_ended") else v
                for k, v in zip(keys, row)}

    def success_latencies(self) -> list[float]:
        return [r[0] for r in self._db.execute("SELECT latency_ms FROM attempts WHERE outcome = 'ok' ORDER BY latency_ms")]

    # ----------------------------------------------------------------- writing (one transaction each)

    def record_attempt(self, attempt: Attempt) -> None:
        """An attempt that changes no task state (a hedged pair's loser)."""
        with self._transaction():
            self._insert_attempt(attempt)

    def record_retry(self, attempt: Attempt) -> None:
        with self._transaction():
            self._insert_attempt(attempt)
            self._set_state(attempt.index, TaskState.RETRYING, attempt.number)

    def record_success(self, attempt: Attempt, response: dict[str, Any]) -> None:
        with self._transaction():
            self._insert_attempt(attempt)
            self._set_state(attempt.index, TaskState.SUCCEEDED, attempt.number)
            self._db.execute(
                "INSERT OR REPLACE INTO results (idx, ok, request_id, response, error, finished_at) "
                "VALUES (?, 1, ?, ?, NULL, ?)",
                (attempt.index, attempt.request_id, json.dumps(response, ensure_ascii=False), time.time()),
            )

    def record_failure(self, attempt: Attempt) -> None:
        assert attempt.error is not None
        with self._transaction():
            self._insert_attempt(attempt)
            self._set_state(attempt.index, TaskState.FAILED, attempt.number)
            self._db.execute(
                "INSERT OR REPLACE INTO results (idx, ok, request_id, response, error, finished_at) "
                "VALUES (?, 0, ?, NULL, ?, ?)",
                (attempt.index, attempt.request_id, json.dumps(error_body(attempt.error), ensure_ascii=False),
                 time.time()),
            )

    def record_cancelled(self, indices: Iterable[int], attempts: Iterable[Attempt] = ()) -> None:
        """Tasks stopped before they finished: they stay unfinished, so `resume` sends them."""
        with self._transaction():
            for attempt in attempts:
                self._insert_attempt(attempt)
            now = time.time()
            self._db.executemany(
                "UPDATE tasks SET state = ?, updated_at = ? WHERE idx = ? AND state NOT IN (?, ?)",
                ((TaskState.CANCELLED, now, i, TaskState.SUCCEEDED, TaskState.FAILED) for i in indices),
            )

    def requeue(self, indices: Iterable[int]) -> None:
        """Failed tasks asked to run again: their error leaves errors.jsonl until they finish anew."""
        indices = list(indices)
        with self._transaction():
            now = time.time()
            self._db.executemany(
                "UPDATE tasks SET state = ?, updated_at = ? WHERE idx = ?",
                ((TaskState.QUEUED, now, i) for i in indices),
            )
            self._db.executemany("DELETE FROM results WHERE idx = ? AND ok = 0", ((i,) for i in indices))

    def log_event(self, kind: str, data: dict[str, Any] | None = None) -> None:
        self._db.execute(
            "INSERT INTO events (at, session, kind, data) VALUES (?, ?, ?, ?)",
            (time.time(), self.session, kind, json.dumps(data, ensure_ascii=False) if data else None),
        )

    def events(self, since_id: int = 0) -> list[tuple[int, float, str, dict | None]]:
        return [(i, at, kind, json.loads(data) if data else None) for i, at, kind, data in self._db.execute(
            "SELECT id, at, kind, data FROM events WHERE id > ? ORDER BY id", (since_id,))]

    # ----------------------------------------------------------------- control queue (attach)

    def send_command(self, command: str, args: dict[str, Any] | None = None) -> None:
        self._db.execute("INSERT INTO control (at, command, args) VALUES (?, ?, ?)",
                         (time.time(), command, json.dumps(args) if args else None))

    def take_commands(self) -> list[tuple[str, dict[str, Any]]]:
        with self._transaction():
            rows = self._db.execute("SELECT id, command, args FROM control WHERE taken_at IS NULL ORDER BY id").fetchall()
            if rows:
                self._db.executemany("UPDATE control SET taken_at = ? WHERE id = ?",
                                     ((time.time(), row[0]) for row in rows))
        return [(command, json.loads(args) if args else {}) for _, command, args in rows]

    def heartbeat(self, **state: Any) -> None:
        """Say who drives the run and what is in flight now (attempts are journaled when they end)."""
        self.set_meta("heartbeat", {"at": time.time(), "pid": os.getpid(), "session": self.session, **state})

    # ----------------------------------------------------------------- internals

    def _transaction(self):
        return _Transaction(self._db)

    def _insert_attempt(self, a: Attempt) -> None:
        error: CallError | None = a.error
        usage: Usage = a.usage
        self._db.execute(
            "INSERT INTO attempts (idx, number, session, endpoint, started_at, latency_ms, ttft_ms, outcome, retry_in_s, "
            "status, error_class, error_code, error_message, request_id, prompt_tokens, completion_tokens, "
            "cached_tokens, reasoning_tokens, cost_usd) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (a.index, a.number, self.session, a.endpoint, a.started_at, a.latency_ms, a.ttft_ms, a.outcome,
             a.retry_in_s, a.status,
             error.kind if error else None, error.code if error else None, error.message if error else None,
             a.request_id, usage.prompt, usage.completion, usage.cached, usage.reasoning, a.cost_usd),
        )

    def _set_state(self, index: int, state: TaskState, attempts: int) -> None:
        self._db.execute("UPDATE tasks SET state = ?, attempts = ?, updated_at = ? WHERE idx = ?",
                         (state, attempts, time.time(), index))


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT (or ROLLBACK on error) on an autocommit connection."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type, exc, tb) -> None:
        self._db.execute("ROLLBACK" if exc_type else "COMMIT")
