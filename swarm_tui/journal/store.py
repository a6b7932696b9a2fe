"""The journal: a run's source of truth, in SQLite (WAL) inside the run directory.

Every attempt is written (failed, retried and cancelled ones too: they may be billed), and a
task's final result is committed in the same transaction as its state, before any listener
hears of it. So whatever instant the process dies at, the journal says exactly which tasks
succeeded, and `resume` never sends those again.

`Journal` (here) opens or creates the file, numbers sessions, and holds the parts that share its
one connection, each whole in its module:

* `writer` (`JournalWriter`): the connection and the one write path, `append(events)`, in
  transactions; a failed write breaks the journal for good (`JournalWriteError`);
* `records` (`JournalRecords`): the journal as the engine sees it (`core.ports.RunJournal`): the
  `record_*` writes and the reads its lanes need;
* `queries` (`JournalQueries`) and `history` (`JournalHistory`): the read side (meta, tasks,
  attempts, results, totals; the event log, agents, batches, verdicts);
* `control` (`ControlQueue`): the queue `attach` and `ctl` steer through, and the heartbeat.

Beside them: `schema` (the tables), `projections` (what each event writes besides its log row),
`connection` (masking every bound string), `task_table` (tasks read from here when looked up),
`note_kinds` and `migrate` (journals of older schemas).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from swarm_tui.core import codec
from swarm_tui.core.errors import InputError
from swarm_tui.core.events import EngineEvent, TaskState
from swarm_tui.core.notes import SessionStarted
from swarm_tui.core.task import Task
from swarm_tui.journal.control import ControlQueue
from swarm_tui.journal.history import JournalHistory
from swarm_tui.journal.migrate import migrate
from swarm_tui.journal.projections import TASK_ROW, TASK_ROW_WITH_INPUT
from swarm_tui.journal.queries import JournalQueries
from swarm_tui.journal.records import JournalRecords
from swarm_tui.journal.schema import JOURNAL_NAME, OLD_EVENTS_TABLE, SCHEMA, SCHEMA_VERSION
from swarm_tui.journal.task_table import JournalTasks
from swarm_tui.journal.writer import JournalWriter
from swarm_tui.util.files import PRIVATE_FILE, describe_write_failure, temp_name


class IncompleteRunError(Exception):
    """A journal file that does not hold a whole run (not made by swarm-tui, or damaged)."""


class Journal:
    """A run's journal: its parts over one connection (see the module)."""

    def __init__(self, path: Path, *, readonly: bool = False, immutable: bool = False) -> None:
        """`immutable`: read a journal no process writes (a finished run in a read-only directory)."""
        self.writer = JournalWriter(path, readonly=readonly, immutable=immutable)
        self.queries = JournalQueries(self.writer.db)
        self.history = JournalHistory(self.writer.db)
        self.records = JournalRecords(self.writer, self.queries, self.history)
        self.control = ControlQueue(self.writer)

    @property
    def path(self) -> Path:
        return self.writer.path

    @property
    def session(self) -> int:
        """This process's session number (`begin_session`; 0 before it)."""
        return self.writer.session

    def close(self) -> None:
        self.writer.close()

    @classmethod
    def create(
        cls, run_dir: Path, tasks: Iterable[Task], meta: dict[str, Any], rows: Iterable[str] | None = None
    ) -> Journal:
        """A new journal holding every task of the job (bodies included: resume needs no job file),
        and with `rows` (a table job's) each task's input row beside it (JSON text, in task order:
        both are read as they are written, one at a time), for the export to give back.

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
                if rows is None:
                    db.executemany(
                        TASK_ROW,
                        (
                            (t.index, t.custom_id, json.dumps(t.body, ensure_ascii=False), TaskState.QUEUED, now)
                            for t in tasks
                        ),
                    )
                else:
                    db.executemany(
                        TASK_ROW_WITH_INPUT,
                        (
                            (t.index, t.custom_id, json.dumps(t.body, ensure_ascii=False), TaskState.QUEUED, now, row)
                            for t, row in zip(tasks, rows, strict=True)
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

    @classmethod
    def open(cls, run_dir: Path, *, readonly: bool = False, up_to_date: bool = False) -> Journal:
        """An existing run's journal; IncompleteRunError when the file is not a whole run.
        `up_to_date` (a reader that needs this version's tables and log: export, report, ctl): a
        journal an older version wrote is brought up to date first, as a resume would; without it
        a reader sees the file as it is (attach follows an old journal with the old follower)."""
        path = Path(run_dir) / JOURNAL_NAME
        if not path.is_file():
            raise FileNotFoundError(f"no journal in {run_dir} (expected {path.name})")
        try:
            journal = cls(path, readonly=readonly)
            meta = journal.queries.meta()
        except sqlite3.OperationalError as exc:
            if readonly and not path.with_name(path.name + "-wal").exists():
                # a finished run in a read-only directory: SQLite cannot make the -shm a WAL journal is
                # read with, and with no -wal the file alone is the whole journal (read as immutable)
                journal = cls(path, readonly=True, immutable=True)
                meta = journal.queries.meta()
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
        schema = int(meta.get("schema") or 1)
        if readonly and up_to_date and schema < SCHEMA_VERSION:
            journal.close()
            cls._bring_up_to_date(path, schema)
            journal = cls(path, readonly=True)
        return journal

    @classmethod
    def _bring_up_to_date(cls, path: Path, schema: int) -> None:
        """Give a journal an older version wrote (read by export, report, ctl, attach...) this
        version's tables, columns and event log, as a resume would (`journal.migrate`): nothing of
        the run changes. A journal that cannot be written here is said in one line."""
        try:
            journal = cls(path)
        except sqlite3.OperationalError as exc:
            raise InputError.single(
                path,
                "journal",
                f"written by an older swarm-tui (schema {schema}) and cannot be brought up to date here "
                f"({describe_write_failure(exc, path)}): copy the run directory somewhere writable and read the copy",
            ) from None
        try:
            migrate(journal)
        finally:
            journal.close()

    def begin_session(self) -> int:
        """Number this process's work on the journal (1 for the first run, 2 for its first resume...);
        a journal of an older schema is brought to this one first (`journal.migrate`)."""
        migrate(self)
        row = self.writer.db.execute("SELECT COALESCE(MAX(session), 0) + 1 FROM log").fetchone()
        self.writer.session = row[0]
        self.writer.append([SessionStarted(os.getpid())])
        return self.writer.session

    def adopt_log(self, timeline: Iterable[tuple[float, int, EngineEvent]]) -> None:
        """Give a journal of an older schema the log of this one: (time, session, event) of what it
        did (rebuilt from a schema-1 journal's rows, or its untyped notes), its `events` table
        dropped, in one transaction."""
        with self.writer.writing():
            db = self.writer.db
            db.executemany(
                "INSERT INTO log (at, session, kind, data) VALUES (?, ?, ?, ?)",
                ((at, session, *codec.encode(event)) for at, session, event in timeline),
            )
            db.execute(f"DROP TABLE IF EXISTS {OLD_EVENTS_TABLE}")
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('schema', ?)", (str(SCHEMA_VERSION),))

    def replace_model(self, model: str) -> None:
        """Every task not answered yet is sent to `model` from now on (a resume with `--model`): one
        update in SQL, no body read into memory; a task that succeeded keeps the body it was answered for."""
        with self.writer.writing():
            self.writer.db.execute(
                "UPDATE tasks SET body = json_set(body, '$.model', ?), updated_at = ? "
                "WHERE state != ? AND json_extract(body, '$.model') IS NOT ?",
                (model, time.time(), TaskState.SUCCEEDED, model),
            )

    def task_table(self) -> JournalTasks:
        """The run's tasks by index, their bodies read from this journal when looked up (`task_table`)."""
        count, low, high = self.writer.db.execute("SELECT COUNT(*), MIN(idx), MAX(idx) FROM tasks").fetchone()
        indices = range(count) if count == 0 or (low, high) == (0, count - 1) else self.queries.task_indices()
        return JournalTasks(self.queries, indices)
