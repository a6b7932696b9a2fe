"""The cache's file: one SQLite database in the user's cache directory, shared by every run and
process (WAL, a busy timeout: a writer waits for another instead of failing).

Why it is shaped so:
* a run looks its tasks up in chunks (`lookup`), once, before any is admitted: a hit at 100k
  entries is a primary-key probe;
* answers are written in small transactions (`put` buffers, `flush` writes), so that a run's
  loop never waits on the disk for each answer, and another process waits milliseconds at most;
* an entry older than the TTL is not a hit (`prune` removes it); when the file passes its size
  bound the least recently used entries go first;
* the cache is never the reason a run fails: a file that cannot be opened or read is reported
  once (`on_problem`) and the run goes on uncached; a write that fails (a full disk) is reported
  once and the run goes on without writing.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from swarm_tui.core.errors import InputError

log = logging.getLogger(__name__)

FILE_NAME = "responses.sqlite3"
DEFAULT_TTL_S = 14 * 24 * 3600.0
"""Answers older than this are not replayed (promptfoo's default)."""
DEFAULT_MAX_BYTES = 2 * 1024**3
"""The size bound: past it, the least recently used answers go first."""
FLUSH_EVERY = 64
"""Answers buffered before they are written in one transaction."""
LOOKUP_CHUNK = 500
"""Keys looked up per query (under SQLite's bound on parameters)."""
BUSY_TIMEOUT_MS = 10_000

SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    key TEXT PRIMARY KEY,
    model TEXT,
    response BLOB NOT NULL,
    request_id TEXT,
    finish_reason TEXT,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    cached_tokens INTEGER NOT NULL DEFAULT 0,
    reasoning_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL,
    size INTEGER NOT NULL,
    created_at REAL NOT NULL,
    last_used_at REAL NOT NULL,
    hits INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS answers_by_use ON answers(last_used_at);
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
"""


class CacheMode(StrEnum):
    """What a run does with the cache (`--cache [read|write]`, `[cache] mode`)."""

    OFF = "off"
    READ = "read"
    """Replay what the cache holds; write nothing."""
    WRITE = "write"
    """Send everything; keep the answers."""
    READ_WRITE = "readwrite"

    @property
    def reads(self) -> bool:
        return self in (CacheMode.READ, CacheMode.READ_WRITE)

    @property
    def writes(self) -> bool:
        return self in (CacheMode.WRITE, CacheMode.READ_WRITE)


@dataclass(frozen=True, slots=True)
class CacheEntry:
    """A validated answer as the cache keeps it: its bytes as received (strict one-line JSON), and
    what the call that got it cost (what a replay saves)."""

    key: str
    model: str | None
    response: bytes
    request_id: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float | None = None
    created_at: float = 0.0


@dataclass(frozen=True)
class CacheSettings:
    """A run's use of the cache (`--cache`, `--cache-dir`, `--cache-ttl`, `--cache-max-size`, a job's
    `[cache]`): kept in the run's plan, so that a resume uses it the same way."""

    mode: str = CacheMode.OFF.value
    """`off`, `read`, `write` or `readwrite` (`CacheMode`)."""
    dir: str | None = None
    """Where the cache file is (None: `default_cache_dir()`)."""
    ttl_s: float = 14 * 24 * 3600.0
    """Cached answers older than this are not replayed."""
    max_bytes: int = 2 * 1024**3
    """The cache's size bound: past it, the least recently used answers go first."""


def default_cache_dir() -> Path:
    """`$XDG_CACHE_HOME/swarm-tui`, else `~/.cache/swarm-tui`."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "swarm-tui"


_COLUMNS = (
    "key, model, response, request_id, finish_reason, prompt_tokens, completion_tokens, cached_tokens, "
    "reasoning_tokens, cost_usd, created_at"
)


def _busy(exc: sqlite3.OperationalError) -> bool:
    """SQLite said the file is busy (`SQLITE_BUSY` or one of its extended codes)."""
    return exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY


def _entry(row: tuple[Any, ...]) -> CacheEntry:
    return CacheEntry(row[0], row[1], bytes(row[2]), *row[3:])


class ResponseCache:
    """One process's handle on the cache file (see the module doc)."""

    def __init__(
        self,
        directory: Path,
        mode: CacheMode = CacheMode.READ_WRITE,
        *,
        ttl_s: float = DEFAULT_TTL_S,
        max_bytes: int = DEFAULT_MAX_BYTES,
        on_problem: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(directory) / FILE_NAME
        self.mode = mode
        self.ttl_s = ttl_s
        self.max_bytes = max_bytes
        self.clock = clock
        self._on_problem = on_problem
        self.problem: str | None = None
        """What went wrong with the file, once said (None: nothing)."""
        self._reading = mode.reads
        self._writing = mode.writes
        self._pending: list[CacheEntry] = []
        self._used: dict[str, float] = {}
        """Keys replayed since the last flush (their last use moves; LRU)."""
        self.lookups = 0
        self.hits = 0
        self._counted = (0, 0)
        self._total_bytes: int | None = None
        """What the entries hold, as far as this process knows (read once, then counted on)."""
        self.aliases: dict[str, str] = {}
        """Base URLs known by another name (the embedded simulator's port changes every run)."""
        self._db: sqlite3.Connection | None = None
        if not mode.writes and not self.path.exists():  # replay only, from a cache never written: nothing to read
            return
        try:
            self._db = self._connect()
        except (sqlite3.Error, OSError) as exc:
            self._give_up(f"the response cache {self.path} cannot be opened ({exc}): this run goes on uncached")

    def _connect(self) -> sqlite3.Connection:
        """The file opened, in WAL mode, with its tables. Two processes that create it at the same
        moment can meet SQLite's "database is locked" at once, without its busy timeout (a new file
        is not in WAL mode yet, and SQLite refuses to wait where waiting could deadlock): the
        setup, each step of which may be done twice, is tried again until the busy timeout."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        pause = 0.005
        while True:
            try:
                return self._open_once()
            except sqlite3.OperationalError as exc:
                if not _busy(exc) or time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 0.2)

    def _open_once(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False)
        try:
            db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = NORMAL")
            db.executescript(SCHEMA)
            db.execute("SELECT count(*) FROM answers WHERE key = ''").fetchone()  # a corrupt file says so here
        except BaseException:
            db.close()
            raise
        return db

    def identity(self, base_url: str) -> str:
        """The endpoint's name in keys: its base URL, or the alias given for it."""
        return self.aliases.get(base_url, base_url)

    # ----------------------------------------------------------------- problems

    def _give_up(self, message: str) -> None:
        """The file cannot be used: said once; nothing more is read or written."""
        self._reading = self._writing = False
        self._pending.clear()
        self._report(message)

    def _stop_writing(self, message: str) -> None:
        self._writing = False
        self._pending.clear()
        self._report(message)

    def _report(self, message: str) -> None:
        if self.problem is not None:
            return
        self.problem = message
        if self._on_problem is not None:
            self._on_problem(message)
        else:
            log.warning("%s", message)

    @property
    def reading(self) -> bool:
        return self._reading and self._db is not None

    @property
    def writing(self) -> bool:
        return self._writing and self._db is not None

    # ----------------------------------------------------------------- reads

    def lookup(self, keys: Iterable[str]) -> dict[str, CacheEntry]:
        """The fresh entries of `keys` (younger than the TTL), by key; each counts as a lookup."""
        wanted = list(dict.fromkeys(keys))
        if not self.reading or not wanted:
            return {}
        assert self._db is not None
        fresh_after = self.clock() - self.ttl_s
        found: dict[str, CacheEntry] = {}
        try:
            for start in range(0, len(wanted), LOOKUP_CHUNK):
                chunk = wanted[start : start + LOOKUP_CHUNK]
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(
                    f"SELECT {_COLUMNS} FROM answers WHERE key IN ({marks}) AND created_at >= ?", (*chunk, fresh_after)
                )
                for row in rows:
                    found[row[0]] = _entry(row)
        except sqlite3.Error as exc:
            self._give_up(f"the response cache {self.path} cannot be read ({exc}): this run goes on uncached")
            return {}
        self.lookups += len(wanted)
        self.hits += len(found)
        return found

    def used(self, key: str) -> None:
        """An entry was replayed: it is recently used (written with the next flush)."""
        self._used[key] = self.clock()

    # ----------------------------------------------------------------- writes

    def put(self, entry: CacheEntry) -> None:
        """Keep a validated answer (buffered; written with the next flush)."""
        if not self.writing:
            return
        self._pending.append(entry)
        if len(self._pending) >= FLUSH_EVERY:
            self.flush()

    def flush(self) -> None:
        """Write what is buffered in one transaction; a failure (a full disk) is said once, and
        the run goes on without writing."""
        if self._db is None or not (self._pending or self._used or self._counters_moved()):
            return
        pending, self._pending = self._pending, []
        used, self._used = self._used, {}
        now = self.clock()
        db = self._db
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                if pending and self._writing:
                    db.executemany(
                        f"INSERT OR REPLACE INTO answers ({_COLUMNS}, size, last_used_at) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (
                            (
                                e.key,
                                e.model,
                                e.response,
                                e.request_id,
                                e.finish_reason,
                                e.prompt_tokens,
                                e.completion_tokens,
                                e.cached_tokens,
                                e.reasoning_tokens,
                                e.cost_usd,
                                e.created_at or now,
                                len(e.response) + len(e.key),
                                now,
                            )
                            for e in pending
                        ),
                    )
                if used and self._writing:
                    db.executemany(
                        "UPDATE answers SET last_used_at = MAX(last_used_at, ?), hits = hits + 1 WHERE key = ?",
                        ((at, key) for key, at in used.items()),
                    )
                if self._writing:
                    self._write_counters(db)
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:  # a failed COMMIT has rolled back already
                    db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            self._stop_writing(
                f"the response cache {self.path} cannot be written ({exc}): this run goes on without writing it"
            )
            return
        if pending and self._writing:
            self._bound(sum(len(e.response) + len(e.key) for e in pending))

    def _counters_moved(self) -> bool:
        return self._writing and (self.lookups, self.hits) != self._counted

    def _write_counters(self, db: sqlite3.Connection) -> None:
        lookups, hits = self.lookups - self._counted[0], self.hits - self._counted[1]
        db.executemany(
            "INSERT INTO counters (name, value) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET value = value + ?",
            (("lookups", lookups, lookups), ("hits", hits, hits)),
        )
        self._counted = (self.lookups, self.hits)

    def _bound(self, added: int) -> None:
        """Past the size bound: the least recently used entries go until it holds again. The
        total is read once per process and counted on (an answer written again counts twice:
        the bound is checked early, never late); eviction reads it afresh."""
        assert self._db is not None
        try:
            if self._total_bytes is None:
                self._total_bytes = self._db.execute("SELECT COALESCE(SUM(size), 0) FROM answers").fetchone()[0]
            else:
                self._total_bytes += added
            if self._total_bytes > self.max_bytes:
                self.evict_to(self.max_bytes)
        except sqlite3.Error as exc:  # a page of garbage the writes did not touch
            self._stop_writing(
                f"the response cache {self.path} cannot be written ({exc}): this run goes on without writing it"
            )

    def evict_to(self, max_bytes: int) -> int:
        """Remove the least recently used entries until the entries hold `max_bytes` at most."""
        assert self._db is not None
        db = self._db
        removed = 0
        db.execute("BEGIN IMMEDIATE")
        try:
            total = db.execute("SELECT COALESCE(SUM(size), 0) FROM answers").fetchone()[0]
            doomed: list[str] = []
            for key, size in db.execute("SELECT key, size FROM answers ORDER BY last_used_at"):
                if total <= max_bytes:
                    break
                doomed.append(key)
                total -= size
            db.executemany("DELETE FROM answers WHERE key = ?", ((k,) for k in doomed))
            removed = len(doomed)
            db.execute("COMMIT")
            self._total_bytes = total
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        return removed

    def close(self) -> None:
        """Write what is buffered and let go of the file (its WAL checkpointed when no one else reads)."""
        if self._db is None:
            return
        self.flush()
        db, self._db = self._db, None
        try:
            if self._writing:
                db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error as exc:
            self._stop_writing(f"the response cache {self.path} cannot be written ({exc}): its answers stay in its WAL")
        finally:
            db.close()

    # ----------------------------------------------------------------- the `cache` command

    @contextlib.contextmanager
    def _command(self) -> Iterator[sqlite3.Connection]:
        """The file for one of the `cache` command's actions: one that turns out unreadable on the way
        (pages of garbage past the ones opening reads) is an InputError naming it, not a traceback."""
        assert self._db is not None
        try:
            yield self._db
        except sqlite3.DatabaseError as exc:
            if self._db.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
            self._give_up(f"the response cache cannot be read ({exc})")
            raise InputError.single(
                self.path, "cache", f"cannot be read ({exc}); remove the file to start an empty cache"
            ) from None

    def stats(self) -> dict[str, Any]:
        """Entries, size, hit rate, the oldest entry, and entries per model."""
        if self._db is None:
            return {"path": str(self.path), "problem": self.problem}
        with self._command() as db:
            return self._stats(db)

    def _stats(self, db: sqlite3.Connection) -> dict[str, Any]:
        entries, size, oldest = db.execute(
            "SELECT count(*), COALESCE(SUM(size), 0), MIN(created_at) FROM answers"
        ).fetchone()
        counters = dict(db.execute("SELECT name, value FROM counters").fetchall())
        lookups, hits = counters.get("lookups", 0), counters.get("hits", 0)
        per_model = [
            {"model": model, "entries": n, "bytes": b, "saved_usd_per_replay": round(c or 0.0, 6)}
            for model, n, b, c in db.execute(
                "SELECT model, count(*), SUM(size), SUM(cost_usd) FROM answers GROUP BY model ORDER BY count(*) DESC"
            )
        ]
        expired = db.execute(
            "SELECT count(*) FROM answers WHERE created_at < ?", (self.clock() - self.ttl_s,)
        ).fetchone()[0]
        return {
            "path": str(self.path),
            "entries": entries,
            "bytes": size,
            "file_bytes": sum(p.stat().st_size for p in self.path.parent.glob(FILE_NAME + "*") if p.is_file()),
            "lookups": lookups,
            "hits": hits,
            "hit_rate": round(hits / lookups, 4) if lookups else None,
            "oldest_at": oldest,
            "expired": expired,
            "models": per_model,
        }

    def clear(self) -> int:
        """Remove every entry (and the counters); returns how many entries there were."""
        with self._command() as db:
            db.execute("BEGIN IMMEDIATE")
            count = db.execute("SELECT count(*) FROM answers").fetchone()[0]
            db.execute("DELETE FROM answers")
            db.execute("DELETE FROM counters")
            db.execute("COMMIT")
            db.execute("VACUUM")
            return int(count)

    def prune(self, max_bytes: int | None = None) -> tuple[int, int]:
        """Remove the expired entries, then the least recently used past `max_bytes` (default the
        cache's bound); returns (expired, evicted)."""
        with self._command() as db:
            db.execute("BEGIN IMMEDIATE")
            expired = db.execute("DELETE FROM answers WHERE created_at < ?", (self.clock() - self.ttl_s,)).rowcount
            db.execute("COMMIT")
            evicted = self.evict_to(self.max_bytes if max_bytes is None else max_bytes)
            db.execute("VACUUM")
            return expired, evicted
