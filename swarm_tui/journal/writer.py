"""The journal's connection and its one write path: `append(events)`, in transactions.

Each event is written to the log and applied to the tables it projects onto
(`journal.projections`) in one transaction, before any listener hears of it; a failure of the
disk (full, read-only, gone) rolls the whole transaction back and breaks the journal for good
(`JournalWriteError`, naming its cause), so the engine stops sending what it could not keep.

`synchronous=NORMAL` in WAL mode: a commit survives the process being killed (the OS has the
pages); only a power cut can lose the last transactions, and then they are simply re-sent.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from swarm_tui.core import codec
from swarm_tui.core.errors import JournalWriteError
from swarm_tui.core.events import EngineEvent
from swarm_tui.journal.connection import MaskedConnection
from swarm_tui.journal.projections import RULES
from swarm_tui.journal.schema import SCHEMA, add_missing_columns
from swarm_tui.util.files import describe_write_failure

LOG_ROW = "INSERT INTO log (at, session, kind, data) VALUES (?, ?, ?, ?)"


class JournalWriter:
    """A journal's connection and its write path: `append` (or the few writes no event reports:
    meta, the control queue, a batch's intent, each inside `writing()`). The journal's other
    parts read through `db` and write through here."""

    def __init__(self, path: Path, *, readonly: bool = False, immutable: bool = False) -> None:
        """`immutable`: read a journal no process writes (a finished run in a read-only directory)."""
        self.path = Path(path)
        if readonly:
            flags = "mode=ro&immutable=1" if immutable else "mode=ro"
            db = sqlite3.connect(f"file:{self.path}?{flags}", uri=True, check_same_thread=False)
        else:
            db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db = MaskedConnection(db)
        if not readonly:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(SCHEMA)
            add_missing_columns(self._db)
        self._db.execute("PRAGMA busy_timeout=5000")
        self.session = 0
        """This process's session number (`Journal.begin_session`): every log row and attempt carries it."""
        self._depth = 0
        """Writes inside a `transaction` that is under way: they join it."""
        self.broken: JournalWriteError | None = None
        """Set by the first write that failed; every later write fails at once."""
        self._failure_listeners: list[Callable[[JournalWriteError], None]] = []
        stat = self.path.stat()
        self._identity = (stat.st_dev, stat.st_ino)

    @property
    def db(self) -> MaskedConnection:
        """The connection: every string a write binds is masked of the process's keys and storable
        as UTF-8. The journal's parts read through it; they write inside `writing()`."""
        return self._db

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self._db.close()

    # ----------------------------------------------------------------- the write path

    def append(self, events: Iterable[EngineEvent]) -> None:
        """The one write path: each event logged and applied to the tables it projects onto
        (`journal.projections`: a task's state, its attempts, its answer...), all in one
        transaction (or in the `transaction` under way). What the log must not hold travels on
        the events as payload fields (`TaskSucceeded.response`, `AgentStepped.body`...)."""
        events = events if isinstance(events, list | tuple) else list(events)
        with self.writing():
            self.write(events, events)

    def log(self, events: Iterable[EngineEvent]) -> None:
        """Events logged without their projections: for callers that still journal what they
        report with a `record_*` method (the Ray driver relays a shard's records, then its events).
        Goes when every caller appends."""
        with self.writing():
            self.write(events, ())

    def write(self, logged: Iterable[EngineEvent], projected: Sequence[EngineEvent]) -> None:
        """`logged` to the log, `projected` to the tables, inside a `writing()` block."""
        now, session, db = time.time(), self.session, self._db
        db.executemany(LOG_ROW, ((now, session, *codec.encode(event)) for event in logged))
        for event in projected:
            rule = RULES.get(type(event))
            if rule is not None:
                rule(db, event, session, now)

    def set_meta(self, key: str, value: Any) -> None:
        with self.writing():
            self._db.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, json.dumps(value, ensure_ascii=False))
            )

    # ----------------------------------------------------------------- transactions and failure

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Several writes in one transaction (the engine's group commit): all of them or none."""
        with self.writing():
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
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


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT (or ROLLBACK on error) on an autocommit connection."""

    def __init__(self, db: MaskedConnection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
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
