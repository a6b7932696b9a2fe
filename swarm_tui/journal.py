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

import contextlib
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .core import codec as eventlog
from .core.batches import BatchLines, BatchRow
from .core.errors import CallError, ErrorClass, error_body
from .core.events import Attempt, EngineEvent, TaskState
from .core.task import Task
from .core.usage import Usage
from .errors import InputError, JournalWriteError
from .masked_db import MaskedConnection
from .providers.answer import strict_text
from .rundir import JOURNAL_NAME, PRIVATE_FILE, describe_write_failure, temp_name

SCHEMA_VERSION = 2
"""1: tasks, attempts, results, run events. 2: the engine's event log (`log`), which views replay."""

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
    cost_usd REAL,
    estimated INTEGER NOT NULL DEFAULT 0,
    finish_reason TEXT
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


class IncompleteRunError(Exception):
    """A journal file that does not hold a whole run (not made by swarm-tui, or damaged)."""


class Journal:
    def __init__(self, path: Path, *, readonly: bool = False, immutable: bool = False) -> None:
        """`immutable`: read a journal no process writes (a finished run in a read-only directory)."""
        self.path = Path(path)
        if readonly:
            flags = "mode=ro&immutable=1" if immutable else "mode=ro"
            db = sqlite3.connect(f"file:{self.path}?{flags}", uri=True, check_same_thread=False)
        else:
            db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db = MaskedConnection(db)
        """Every string a write binds is masked of the process's keys and storable as UTF-8."""
        if not readonly:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(SCHEMA)
            self._add_missing_columns()
        self._db.execute("PRAGMA busy_timeout=5000")
        self.session = 0
        self._depth = 0
        """Writes inside a `transaction` that is under way: they join it."""
        self.broken: JournalWriteError | None = None
        """Set by the first write that failed; every later write fails at once."""
        self._failure_listeners: list[Callable[[JournalWriteError], None]] = []
        stat = self.path.stat()
        self._identity = (stat.st_dev, stat.st_ino)

    ADDED_COLUMNS = (
        ("attempts", "estimated", "INTEGER NOT NULL DEFAULT 0"),
        ("attempts", "finish_reason", "TEXT"),
    )
    """Columns later versions added to a table: a journal made before them gets them on opening."""

    def _add_missing_columns(self) -> None:
        for table, column, declaration in self.ADDED_COLUMNS:
            have = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
            if column not in have:
                self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")

    # ----------------------------------------------------------------- lifecycle

    @classmethod
    def create(cls, run_dir: Path, tasks: list[Task], meta: dict[str, Any]) -> Journal:
        """A new journal holding every task of the job (bodies included: resume needs no job file).

        Built under a temporary name and renamed into place, so that whenever the process dies
        (Ctrl-C, SIGTERM, kill -9 during a large job's ~1 s of writing) the directory holds
        either a complete run or no journal at all."""
        run_dir.mkdir(parents=True, exist_ok=True)
        path = run_dir / JOURNAL_NAME
        if path.exists():
            raise FileExistsError(f"{run_dir} already holds a run; use `swarm-tui resume {run_dir}`")
        tmp = run_dir / temp_name(JOURNAL_NAME)
        tmp.unlink(missing_ok=True)
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE))
        now = time.time()
        try:
            db = sqlite3.connect(tmp, isolation_level=None)
            try:
                db.execute("PRAGMA journal_mode=OFF")  # a new file that only the rename makes real
                db.executescript(SCHEMA)
                db.execute("BEGIN")
                db.executemany(
                    "INSERT INTO tasks (idx, custom_id, body, state, updated_at) VALUES (?, ?, ?, ?, ?)",
                    (
                        (t.index, t.custom_id, json.dumps(t.body, ensure_ascii=False), TaskState.QUEUED, now)
                        for t in tasks
                    ),
                )
                db.executemany(
                    "INSERT INTO meta (key, value) VALUES (?, ?)",
                    [
                        (k, json.dumps(v, ensure_ascii=False))
                        for k, v in {**meta, "schema": SCHEMA_VERSION, "created_at": now}.items()
                    ],
                )
                db.execute("COMMIT")
            finally:
                db.close()
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return cls(path)

    def add_tasks(self, tasks: Iterable[Task], logged: Iterable[EngineEvent] = ()) -> None:
        with self._writing():
            self._append(logged)
            self._db.executemany(
                "INSERT OR IGNORE INTO tasks (idx, custom_id, body, state, updated_at) VALUES (?, ?, ?, ?, ?)",
                (
                    (t.index, t.custom_id, json.dumps(t.body, ensure_ascii=False), TaskState.QUEUED, time.time())
                    for t in tasks
                ),
            )

    @classmethod
    def open(cls, run_dir: Path, *, readonly: bool = False) -> Journal:
        """An existing run's journal; IncompleteRunError when the file is not a whole run."""
        path = Path(run_dir) / JOURNAL_NAME
        if not path.is_file():
            raise FileNotFoundError(f"no journal in {run_dir} (expected {path.name})")
        try:
            journal = cls(path, readonly=readonly)
            meta = journal.meta()
        except sqlite3.OperationalError as exc:
            if readonly and not path.with_name(path.name + "-wal").exists():
                # a finished run in a read-only directory: SQLite cannot make the -shm a WAL journal is
                # read with, and with no -wal the file alone is the whole journal (read as immutable)
                journal = cls(path, readonly=True, immutable=True)
                meta = journal.meta()
            elif readonly:
                raise InputError.single(
                    path, "journal", f"cannot be read ({exc}): its directory is read-only and it has a -wal file"
                ) from None
            else:  # resume: a journal that cannot take writes (a read-only file or directory)
                raise InputError.single(
                    path, "journal", f"{describe_write_failure(exc, path)}; resume writes the journal"
                ) from None
        except sqlite3.DatabaseError as exc:
            raise IncompleteRunError(f"{path} is not a swarm-tui journal ({exc})") from None
        if "plan" not in meta or "job" not in meta:
            journal.close()
            raise IncompleteRunError(
                f"{path} does not hold a whole run (its creation was interrupted?); "
                f"start it again with `swarm-tui run JOB --out` a new directory"
            )
        return journal

    # ----------------------------------------------------------------- failure

    def on_write_failure(self, listener: Callable[[JournalWriteError], None]) -> None:
        """Call `listener` once, at the first write that fails (the engine stops dispatch there)."""
        self._failure_listeners.append(listener)

    def check_in_place(self) -> None:
        """Fail (as a write would) when the journal's file was deleted, moved or replaced under
        us: SQLite would go on writing into a file nobody can open again."""
        if self.broken is not None:
            return
        try:
            stat = self.path.stat()
            same = (stat.st_dev, stat.st_ino) == self._identity
        except OSError:
            same = False
        if not same:
            self._break(JournalWriteError(f"the journal {self.path} was deleted, moved or replaced"))

    def _break(self, error: JournalWriteError) -> None:
        if self.broken is not None:
            return
        self.broken = error
        for listener in self._failure_listeners:
            listener(error)

    def begin_session(self) -> int:
        """Number this process's work on the journal (1 for the first run, 2 for its first resume...)."""
        row = self._db.execute("SELECT COALESCE(MAX(session), 0) + 1 FROM events").fetchone()
        self.session = row[0]
        self.log_event("session", {"pid": os.getpid()})
        return self.session

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self._db.close()

    # ----------------------------------------------------------------- reading

    def meta(self) -> dict[str, Any]:
        return {k: json.loads(v) for k, v in self._db.execute("SELECT key, value FROM meta")}

    def set_meta(self, key: str, value: Any) -> None:
        with self._writing():
            self._db.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, json.dumps(value, ensure_ascii=False))
            )

    def replace_bodies(self, bodies: dict[int, dict[str, Any]]) -> None:
        """Tasks to be sent with other bodies from now on (a resume with `--model`); a task that
        succeeded keeps the body it was answered for."""
        with self._writing():
            self._db.executemany(
                "UPDATE tasks SET body = ?, updated_at = ? WHERE idx = ? AND state != ?",
                (
                    (json.dumps(body, ensure_ascii=False), time.time(), index, TaskState.SUCCEEDED)
                    for index, body in bodies.items()
                ),
            )

    def tasks(self) -> list[TaskRow]:
        return [
            TaskRow(idx, cid, json.loads(body), TaskState(state), attempts)
            for idx, cid, body, state, attempts in self._db.execute(
                "SELECT idx, custom_id, body, state, attempts FROM tasks ORDER BY idx"
            )
        ]

    def body_of(self, index: int) -> dict[str, Any]:
        """One task's request body as journaled now (an agent's: its transcript so far)."""
        row = self._db.execute("SELECT body FROM tasks WHERE idx = ?", (index,)).fetchone()
        return json.loads(row[0]) if row else {}

    def states(self) -> dict[int, TaskState]:
        return {idx: TaskState(state) for idx, state in self._db.execute("SELECT idx, state FROM tasks")}

    def counts(self) -> dict[str, int]:
        return dict(self._db.execute("SELECT state, COUNT(*) FROM tasks GROUP BY state").fetchall())

    def attempts_of(self, index: int) -> list[dict[str, Any]]:
        cursor = self._db.execute("SELECT * FROM attempts WHERE idx = ? ORDER BY id", (index,))
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor]

    def has_attempts(self) -> bool:
        return self._db.execute("SELECT 1 FROM attempts LIMIT 1").fetchone() is not None

    def attempts_since(self, last_id: int) -> list[dict[str, Any]]:
        cursor = self._db.execute("SELECT * FROM attempts WHERE id > ? ORDER BY id", (last_id,))
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor]

    def result_of(self, index: int) -> dict[str, Any] | None:
        row = self._db.execute("SELECT ok, request_id, response, error FROM results WHERE idx = ?", (index,)).fetchone()
        if row is None:
            return None
        ok, request_id, response, error = row
        return {
            "ok": bool(ok),
            "request_id": request_id,
            "response": json.loads(response) if response else None,
            "error": json.loads(error) if error else None,
        }

    def iter_result_texts(self) -> Iterator[tuple[str, bool, str | None, str | None, dict | None]]:
        """`iter_results` with each answer as the JSON text the journal keeps (for the export,
        which splices it in without reading it)."""
        for cid, ok, request_id, response, error in self._db.execute(
            "SELECT t.custom_id, r.ok, r.request_id, r.response, r.error FROM results r "
            "JOIN tasks t ON t.idx = r.idx ORDER BY r.idx"
        ):
            yield cid, bool(ok), request_id, response, (json.loads(error) if error else None)

    def iter_results(self) -> Iterator[tuple[str, bool, str | None, dict | None, dict | None]]:
        """(custom_id, ok, request_id, response body, error) for every finished task, in task order."""
        for cid, ok, request_id, response, error in self._db.execute(
            "SELECT t.custom_id, r.ok, r.request_id, r.response, r.error FROM results r "
            "JOIN tasks t ON t.idx = r.idx ORDER BY r.idx"
        ):
            yield (
                cid,
                bool(ok),
                request_id,
                json.loads(response) if response else None,
                (json.loads(error) if error else None),
            )

    def attempt_totals(self) -> dict[str, Any]:
        row = self._db.execute(
            "SELECT COUNT(*), SUM(outcome = 'retry'), SUM(error_class = ?), SUM(error_class = ?), "
            "SUM(error_class = ?), COALESCE(SUM(prompt_tokens), 0), COALESCE(SUM(completion_tokens), 0), "
            "COALESCE(SUM(cached_tokens), 0), COALESCE(SUM(reasoning_tokens), 0), SUM(cost_usd), "
            "SUM(cost_usd IS NULL AND prompt_tokens + completion_tokens > 0), MIN(started_at), "
            "MAX(started_at + latency_ms / 1000.0), "
            + (
                "SUM(CASE WHEN estimated THEN cost_usd END), SUM(estimated), "
                "SUM(outcome = 'ok' AND finish_reason = 'length') "
                if self._has_estimates()
                else "NULL, 0, 0 "
            )
            + "FROM attempts",
            (ErrorClass.RATE_LIMIT, ErrorClass.SERVER, ErrorClass.TIMEOUT),
        ).fetchone()
        keys = (
            "sent",
            "retried",
            "rate_limited",
            "server_errors",
            "timeouts",
            "prompt",
            "completion",
            "cached",
            "reasoning",
            "cost_usd",
            "unpriced",
            "first_started",
            "last_ended",
            "estimated_cost_usd",
            "estimated",
            "truncated",
        )
        nullable = ("cost_usd", "first_started", "last_ended", "estimated_cost_usd")
        return {k: v if k in nullable else (v or 0) for k, v in zip(keys, row, strict=True)}

    def _has_estimates(self) -> bool:
        """The attempts table has the `estimated` column (a journal opened read-only from before
        it was added has none)."""
        return any(row[1] == "estimated" for row in self._db.execute("PRAGMA table_info(attempts)"))

    def abandoned_attempts(self) -> int:
        """Attempts the engine abandoned past the straggler deadline (and sent again), all sessions."""
        return self._db.execute("SELECT COUNT(*) FROM attempts WHERE error_code = 'straggler'").fetchone()[0]

    def spent_usd(self) -> float:
        """What every attempt journaled so far cost (all sessions): the budget's starting point."""
        return self._db.execute("SELECT COALESCE(SUM(cost_usd), 0) FROM attempts").fetchone()[0]

    def success_latencies(self) -> list[float]:
        return [
            r[0]  # a batch line's latency is its batch's hours, not a call's
            for r in self._db.execute(
                "SELECT latency_ms FROM attempts WHERE outcome = 'ok' AND endpoint NOT LIKE '%/batch' "
                "ORDER BY latency_ms"
            )
        ]

    # ----------------------------------------------------------------- writing (one transaction each)

    # `logged`: the events that report the change, written to the log in the same transaction

    def record_attempt(self, attempt: Attempt, logged: Iterable[EngineEvent] = ()) -> None:
        """An attempt that changes no task state (a hedged pair's loser)."""
        with self._writing():
            self._insert_attempt(attempt)
            self._append(logged)

    def record_retry(self, attempt: Attempt, logged: Iterable[EngineEvent] = ()) -> None:
        with self._writing():
            self._append(logged)
            self._retry(attempt)

    def record_success(
        self, attempt: Attempt, response: dict[str, Any] | bytes, logged: Iterable[EngineEvent] = ()
    ) -> None:
        """A task's answer: `response` as the bytes received (kept as they came) or as a body."""
        with self._writing():
            self._append(logged)
            self._succeed(attempt, response)

    def record_failure(self, attempt: Attempt, logged: Iterable[EngineEvent] = ()) -> None:
        with self._writing():
            self._append(logged)
            self._fail(attempt)

    def record_cancelled(
        self, indices: Iterable[int], attempts: Iterable[Attempt] = (), logged: Iterable[EngineEvent] = ()
    ) -> None:
        """Tasks stopped before they finished: they stay unfinished, so `resume` sends them."""
        with self._writing():
            self._append(logged)
            self._cancel(indices, attempts)

    def record_step(self, attempt: Attempt, body: dict[str, Any], logged: Iterable[EngineEvent] = ()) -> None:
        """A multi-step agent's model call asked for tools: the call, and the transcript that now
        holds its answer (a resumed run continues from it and never sends that call again)."""
        with self._writing():
            self._insert_attempt(attempt)
            self._append(logged)
            self._db.execute(
                "UPDATE tasks SET body = ?, attempts = MAX(attempts, ?), updated_at = ? WHERE idx = ? AND state != ?",
                (json.dumps(body, ensure_ascii=False), attempt.number, time.time(), attempt.index, TaskState.SUCCEEDED),
            )

    def record_tool_call(
        self,
        index: int,
        step: int,
        call: dict[str, Any],
        result: str,
        ok: bool,
        latency_ms: float,
        body: dict[str, Any],
        logged: Iterable[EngineEvent] = (),
    ) -> None:
        """A tool call's result, and the transcript that now carries it (never run again)."""
        function = call.get("function") or {}
        with self._writing():
            self._append(logged)
            self._db.execute(
                "INSERT OR IGNORE INTO tool_calls (idx, step, call_id, name, arguments, result, ok, latency_ms, "
                "finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    index,
                    step,
                    call.get("id"),
                    function.get("name", ""),
                    function.get("arguments"),
                    result,
                    ok,
                    latency_ms,
                    time.time(),
                ),
            )
            self._db.execute(
                "UPDATE tasks SET body = ?, updated_at = ? WHERE idx = ? AND state != ?",
                (json.dumps(body, ensure_ascii=False), time.time(), index, TaskState.SUCCEEDED),
            )

    def tool_calls_of(self, index: int) -> list[dict[str, Any]]:
        cursor = self._db.execute("SELECT * FROM tool_calls WHERE idx = ? ORDER BY id", (index,))
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor]

    def agent_totals(self) -> dict[str, int] | None:
        """Steps, tool calls and the critical path of a run with multi-step agents (None without)."""
        steps = dict(self._db.execute("SELECT idx, COUNT(*) FROM attempts WHERE outcome = 'step' GROUP BY idx"))
        calls, errors = self._db.execute("SELECT COUNT(*), COALESCE(SUM(ok = 0), 0) FROM tool_calls").fetchone()
        if not steps and not calls:
            return None
        return {
            "steps": sum(steps.values()),
            "tool_calls": calls,
            "tool_errors": errors,
            "critical_path": max(steps.values(), default=0) + 1,  # the final answer is a step too
        }

    def iter_transcripts(self) -> Iterator[dict[str, Any]]:
        """Each agent's whole transcript, in task order: its messages (the final answer last, when
        it has one) and its tool calls with their results and timings."""
        calls: dict[int, list[dict[str, Any]]] = {}
        for idx, step, call_id, name, arguments, result, ok, latency_ms in self._db.execute(
            "SELECT idx, step, call_id, name, arguments, result, ok, latency_ms FROM tool_calls ORDER BY id"
        ):
            calls.setdefault(idx, []).append(
                {
                    "step": step,
                    "id": call_id,
                    "name": name,
                    "arguments": arguments,
                    "result": result,
                    "ok": bool(ok),
                    "latency_ms": round(latency_ms, 1),
                }
            )
        for idx, custom_id, body, state, response in self._db.execute(
            "SELECT t.idx, t.custom_id, t.body, t.state, r.response FROM tasks t LEFT JOIN results r "
            "ON r.idx = t.idx AND r.ok = 1 ORDER BY t.idx"
        ):
            messages = json.loads(body).get("messages", [])
            if response:
                choices = json.loads(response).get("choices") or [{}]
                messages.append(choices[0].get("message") or {})
            steps = sum(1 for m in messages if m.get("role") == "assistant" and m.get("tool_calls"))
            yield {
                "custom_id": custom_id,
                "state": state,
                "steps": steps,
                "messages": messages,
                "tool_calls": calls.get(idx, []),
            }

    # ----------------------------------------------------------------- the batch lane

    def record_batch_intent(self, endpoint: str, input_file_id: str, tasks: Sequence[tuple[int, int]]) -> BatchRow:
        """An uploaded Batch input file about to become a batch: (task index, attempt number) of
        each line. Written before the batch is created, so that a process killed in between
        finds its batch (by this file id) instead of submitting the same tasks again."""
        now = time.time()
        with self._writing():
            cursor = self._db.execute(
                "INSERT INTO batches (endpoint, input_file_id, status, tasks, submitted_at) VALUES (?, ?, ?, ?, ?)",
                (endpoint, input_file_id, "uploaded", json.dumps(list(tasks)), now),
            )
            self._db.executemany(  # the numbers are taken: a later attempt numbers on from them
                "UPDATE tasks SET attempts = MAX(attempts, ?) WHERE idx = ?", ((n, i) for i, n in tasks)
            )
        assert cursor.lastrowid is not None
        return BatchRow(cursor.lastrowid, endpoint, input_file_id, None, "uploaded", list(tasks), now)

    def record_batch_created(self, row: int, batch_id: str, status: str, logged: Iterable[EngineEvent] = ()) -> None:
        with self._writing():
            self._append(logged)
            self._db.execute("UPDATE batches SET batch_id = ?, status = ? WHERE id = ?", (batch_id, status, row))

    def record_batch_progress(
        self, row: int, status: str, counts: dict[str, int], logged: Iterable[EngineEvent] = ()
    ) -> None:
        with self._writing():
            self._append(logged)
            self._db.execute(
                "UPDATE batches SET status = ?, counts = ? WHERE id = ?", (status, json.dumps(counts), row)
            )

    def record_batch_lines(
        self,
        row: int,
        status: str,
        files: tuple[str | None, str | None],
        lines: BatchLines,
        logged: Iterable[EngineEvent] = (),
    ) -> None:
        """A finished batch's every line, and the batch closed, in one transaction: a process
        killed while writing them leaves the batch open, and the next session reads its files again."""
        with self._writing():
            self._append(logged)
            for attempt, response in lines.succeeded:
                self._succeed(attempt, response)
            for attempt in lines.failed:
                self._fail(attempt)
            for attempt in lines.retried:
                self._retry(attempt)
            self._cancel([a.index for a in lines.unfinished], lines.unfinished)
            self._db.execute(
                "UPDATE batches SET status = ?, ended_at = ?, output_file_id = ?, error_file_id = ? WHERE id = ?",
                (status, time.time(), *files, row),
            )

    def drop_batch(self, row: int, status: str) -> None:
        """A batch that was never created (or cannot be found): its tasks are free again."""
        with self._writing():
            self._db.execute("UPDATE batches SET status = ?, ended_at = ? WHERE id = ?", (status, time.time(), row))

    def open_batches(self) -> list[BatchRow]:
        """Batches submitted (or about to be) whose lines are not journaled yet."""
        return [
            BatchRow(row, endpoint, file_id, batch_id, status, [tuple(t) for t in json.loads(tasks)], submitted_at)
            for row, endpoint, file_id, batch_id, status, tasks, submitted_at in self._db.execute(
                "SELECT id, endpoint, input_file_id, batch_id, status, tasks, submitted_at FROM batches "
                "WHERE ended_at IS NULL ORDER BY id"
            )
        ]

    def batch_summary(self) -> list[dict[str, Any]]:
        """Every batch of the run, for summary.json (no rows: a run without the batch lane)."""
        with contextlib.suppress(sqlite3.OperationalError):  # a journal from before the lane, read-only
            cursor = self._db.execute(
                "SELECT batch_id, input_file_id, status, tasks, submitted_at, ended_at, output_file_id, "
                "error_file_id FROM batches WHERE batch_id IS NOT NULL ORDER BY id"
            )
            return [
                {
                    "batch_id": batch_id,
                    "input_file_id": file_id,
                    "status": status,
                    "requests": len(json.loads(tasks)),
                    "submitted_at": submitted_at,
                    "ended_at": ended_at,
                    "output_file_id": output_id,
                    "error_file_id": error_id,
                }
                for batch_id, file_id, status, tasks, submitted_at, ended_at, output_id, error_id in cursor
            ]
        return []

    def has_batches(self) -> bool:
        """The run has submitted (or was about to submit) a batch."""
        return self._db.execute("SELECT 1 FROM batches LIMIT 1").fetchone() is not None

    def batch_tried(self) -> set[int]:
        """Tasks that already had a batch line: a retry of theirs goes live (`--lane auto`)."""
        return {r[0] for r in self._db.execute("SELECT DISTINCT idx FROM attempts WHERE endpoint LIKE '%/batch'")}

    # ----------------------------------------------------------------- the judge

    def record_judgment(
        self, index: int, score: float, reason: str, round_number: int, logged: Iterable[EngineEvent] = ()
    ) -> None:
        """A judged answer (a resumed run never judges it again)."""
        with self._writing():
            self._append(logged)
            self._db.execute(
                "INSERT OR REPLACE INTO judgments (idx, score, reason, round, at) VALUES (?, ?, ?, ?, ?)",
                (index, score, reason, round_number, time.time()),
            )

    def cost_of_indices_below(self, index: int) -> float:
        """What the calls journaled under indices below `index` cost (a side lane's: the judge's)."""
        return self._db.execute("SELECT COALESCE(SUM(cost_usd), 0) FROM attempts WHERE idx < ?", (index,)).fetchone()[0]

    def judgments(self) -> dict[int, tuple[float, str, int]]:
        """(score, reason, round) of every judged answer, by task index, in the order judged."""
        with contextlib.suppress(sqlite3.OperationalError):  # a journal from before the judge, read-only
            return {
                idx: (score, reason, round_number)
                for idx, score, reason, round_number in self._db.execute(
                    "SELECT idx, score, reason, round FROM judgments ORDER BY at"
                )
            }
        return {}

    def requeue(self, indices: Iterable[int], logged: Iterable[EngineEvent] = ()) -> None:
        """Failed tasks asked to run again: their error leaves errors.jsonl until they finish anew."""
        indices = list(indices)
        with self._writing():
            self._append(logged)
            now = time.time()
            self._db.executemany(
                "UPDATE tasks SET state = ?, updated_at = ? WHERE idx = ? AND state != ?",
                ((TaskState.QUEUED, now, i, TaskState.SUCCEEDED) for i in indices),
            )
            self._db.executemany("DELETE FROM results WHERE idx = ? AND ok = 0", ((i,) for i in indices))

    def log_event(self, kind: str, data: dict[str, Any] | None = None) -> None:
        with self._writing():
            self._db.execute(
                "INSERT INTO events (at, session, kind, data) VALUES (?, ?, ?, ?)",
                (time.time(), self.session, kind, json.dumps(data, ensure_ascii=False) if data else None),
            )

    def log(self, events: Iterable[EngineEvent]) -> None:
        """Events that change nothing else in the journal (a call started, a limit moved)."""
        with self._writing():
            self._append(events)

    def log_since(self, seq: int = 0, limit: int | None = None) -> list[tuple[int, float, EngineEvent]]:
        """(sequence number, epoch time, event) of the log after `seq`, in order."""
        query = "SELECT seq, at, kind, data FROM log WHERE seq > ? ORDER BY seq"
        rows = self._db.execute(query + (" LIMIT ?" if limit else ""), (seq, limit) if limit else (seq,))
        return [(n, at, eventlog.decode(kind, data)) for n, at, kind, data in rows]

    def adopt_log(self, timeline: Iterable[tuple[float, EngineEvent]]) -> None:
        """Give a schema-1 journal its event log (events rebuilt from its rows, with their times)."""
        with self._writing():
            self._db.executemany(
                "INSERT INTO log (at, session, kind, data) VALUES (?, 0, ?, ?)",
                ((at, *eventlog.encode(event)) for at, event in timeline),
            )
            self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('schema', ?)", (str(SCHEMA_VERSION),))

    def run_ended(self) -> bool:
        """The log's last run (if any) logged its end: no session was killed mid-run."""
        row = self._db.execute(
            "SELECT kind FROM log WHERE kind IN ('RunStarted', 'RunFinished') ORDER BY seq DESC LIMIT 1"
        ).fetchone()
        return row is None or row[0] == "RunFinished"

    def has_log(self) -> bool:
        """The journal carries the event log from its first session (schema 2, or migrated)."""
        return (self.meta().get("schema") or 1) >= 2

    def events(self, since_id: int = 0) -> list[tuple[int, float, str, dict | None]]:
        return [
            (i, at, kind, json.loads(data) if data else None)
            for i, at, kind, data in self._db.execute(
                "SELECT id, at, kind, data FROM events WHERE id > ? ORDER BY id", (since_id,)
            )
        ]

    # ----------------------------------------------------------------- control queue (attach)

    def send_command(self, command: str, args: dict[str, Any] | None = None) -> None:
        with self._writing():
            self._db.execute(
                "INSERT INTO control (at, command, args) VALUES (?, ?, ?)",
                (time.time(), command, json.dumps(args) if args else None),
            )

    def take_commands(self) -> list[tuple[str, dict[str, Any]]]:
        with self._writing():
            rows = self._db.execute(
                "SELECT id, command, args FROM control WHERE taken_at IS NULL ORDER BY id"
            ).fetchall()
            if rows:
                self._db.executemany(
                    "UPDATE control SET taken_at = ? WHERE id = ?", ((time.time(), row[0]) for row in rows)
                )
        return [(command, json.loads(args) if args else {}) for _, command, args in rows]

    def heartbeat(self, **state: Any) -> None:
        """Say who drives the run and what is in flight now (attempts are journaled when they end)."""
        self.set_meta("heartbeat", {"at": time.time(), "pid": os.getpid(), "session": self.session, **state})

    # ----------------------------------------------------------------- internals

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Several writes in one transaction (the engine's group commit): all of them or none."""
        with self._writing():
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """One write transaction (or a part of the `transaction` under way); a failure of the disk
        (full, read-only, gone) breaks the journal for good and is raised as `JournalWriteError`
        naming its cause."""
        if self.broken is not None:
            raise self.broken
        if self._depth:
            yield
            return
        try:
            with _Transaction(self._db):
                yield
        except (sqlite3.Error, OSError) as exc:
            if isinstance(exc, sqlite3.IntegrityError | sqlite3.ProgrammingError | sqlite3.InterfaceError):
                raise  # a bug, not the disk
            self._break(JournalWriteError(describe_write_failure(exc, self.path)))
            assert self.broken is not None
            raise self.broken from exc

    def _append(self, events: Iterable[EngineEvent]) -> None:
        now, session = time.time(), self.session
        self._db.executemany(
            "INSERT INTO log (at, session, kind, data) VALUES (?, ?, ?, ?)",
            ((now, session, *eventlog.encode(event)) for event in events),
        )

    def _insert_attempt(self, a: Attempt) -> None:
        error: CallError | None = a.error
        usage: Usage = a.usage
        self._db.execute(
            "INSERT INTO attempts (idx, number, session, endpoint, started_at, latency_ms, ttft_ms, outcome, "
            "retry_in_s, status, error_class, error_code, error_message, request_id, prompt_tokens, "
            "completion_tokens, cached_tokens, reasoning_tokens, cost_usd, estimated, finish_reason) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                a.index,
                a.number,
                self.session,
                a.endpoint,
                a.started_at,
                a.latency_ms,
                a.ttft_ms,
                a.outcome,
                a.retry_in_s,
                a.status,
                error.kind if error else None,
                error.code if error else None,
                error.message if error else None,
                a.request_id,
                usage.prompt,
                usage.completion,
                usage.cached,
                usage.reasoning,
                a.cost_usd,
                a.estimated,
                a.finish_reason,
            ),
        )

    def _succeed(self, attempt: Attempt, response: dict[str, Any] | bytes) -> None:
        self._insert_attempt(attempt)
        self._set_state(attempt.index, TaskState.SUCCEEDED, attempt.number)
        self._db.execute(
            "INSERT INTO results (idx, ok, request_id, response, error, finished_at) VALUES (?, 1, ?, ?, NULL, ?) "
            "ON CONFLICT (idx) DO UPDATE SET ok = 1, request_id = excluded.request_id, "
            "response = excluded.response, error = NULL, finished_at = excluded.finished_at "
            "WHERE results.ok = 0",
            (attempt.index, attempt.request_id, _response_text(response), time.time()),
        )

    def _fail(self, attempt: Attempt) -> None:
        assert attempt.error is not None
        self._insert_attempt(attempt)
        self._set_state(attempt.index, TaskState.FAILED, attempt.number)
        self._db.execute(  # a success already journaled is never turned into a failure
            "INSERT INTO results (idx, ok, request_id, response, error, finished_at) VALUES (?, 0, ?, NULL, ?, ?) "
            "ON CONFLICT (idx) DO UPDATE SET request_id = excluded.request_id, error = excluded.error, "
            "finished_at = excluded.finished_at WHERE results.ok = 0",
            (attempt.index, attempt.request_id, json.dumps(error_body(attempt.error), ensure_ascii=False), time.time()),
        )

    def _retry(self, attempt: Attempt) -> None:
        self._insert_attempt(attempt)
        self._set_state(attempt.index, TaskState.RETRYING, attempt.number)

    def _cancel(self, indices: Iterable[int], attempts: Iterable[Attempt]) -> None:
        for attempt in attempts:
            self._insert_attempt(attempt)
            self._db.execute(  # its number is taken: a resumed run numbers on from it
                "UPDATE tasks SET attempts = MAX(attempts, ?) WHERE idx = ?", (attempt.number, attempt.index)
            )
        now = time.time()
        self._db.executemany(
            "UPDATE tasks SET state = ?, updated_at = ? WHERE idx = ? AND state NOT IN (?, ?)",
            ((TaskState.CANCELLED, now, i, TaskState.SUCCEEDED, TaskState.FAILED) for i in indices),
        )

    def _set_state(self, index: int, state: TaskState, attempts: int) -> None:
        """A task's new state; a task that succeeded keeps its success (another attempt's late
        failure, or a second process, never turns a paid answer into an error)."""
        self._db.execute(
            "UPDATE tasks SET state = ?, attempts = MAX(attempts, ?), updated_at = ? WHERE idx = ? AND state != ?",
            (state, attempts, time.time(), index, TaskState.SUCCEEDED),
        )


def _response_text(response: dict[str, Any] | bytes) -> str:
    """An answer as the journal keeps it: strict one-line JSON in UTF-8 (`providers.answer`): the
    bytes a client checked when they came, or a body (a batch line's) encoded under the same rules."""
    if isinstance(response, bytes | bytearray):
        try:
            return response.decode("utf-8")
        except UnicodeDecodeError:
            return strict_text(json.loads(response))
    return strict_text(response)


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT (or ROLLBACK on error) on an autocommit connection."""

    def __init__(self, db: MaskedConnection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            try:
                self._db.execute("COMMIT")
                return
            except sqlite3.Error:
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
                raise
        with contextlib.suppress(sqlite3.Error):  # the failure being raised is the one to report
            self._db.execute("ROLLBACK")
