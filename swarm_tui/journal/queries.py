"""The journal read: tasks, their attempts and answers, and the run's totals.

What `outputs` (results.jsonl, summary.json), `estimate`, `attach` and a resumed run read of
a journal, from its tables (the projections of its log, `journal.projections`): one query each,
no replay. What an agent did and the batch lane's batches are read in `journal.history`.
"""

from __future__ import annotations

import json
import sqlite3
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from swarm_tui.core.call_errors import ANSWER_ERRORS, ErrorClass
from swarm_tui.core.events import Spawn, TaskState
from swarm_tui.journal.connection import MaskedConnection

UNKNOWN_CLASS = "unknown"
"""The class of a failure whose error was not classified."""


@dataclass(frozen=True)
class TaskRow:
    index: int
    custom_id: str
    body: dict[str, Any]
    state: TaskState
    attempts: int


@dataclass(frozen=True, slots=True)
class ExportRow:
    """One task as a table export gives it back (`run.export_table`): its input row (a table job's,
    JSON text; None for other jobs), its answer or error as the journal keeps them (JSON text),
    and what its attempts took, all sessions: how many, tokens, cost, and the latency and endpoint
    of the attempt that answered it (else its last)."""

    index: int
    custom_id: str
    state: str
    row: str | None
    body: str
    ok: bool | None
    response: str | None
    error: str | None
    attempts: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    cost_usd: float | None
    unpriced: bool
    latency_ms: float | None
    endpoint: str | None
    error_class: str | None
    parsed: str | None = None
    """The answer's JSON value as its checks read it (JSON text), None without."""


_EXPORT_ROWS = """
SELECT t.idx, t.custom_id, t.state, {row}, t.body, r.ok, r.response, r.error,
       COALESCE(a.n, 0), COALESCE(a.prompt, 0), COALESCE(a.completion, 0), COALESCE(a.cached, 0),
       a.cost, COALESCE(a.unpriced, 0), l.latency_ms, l.endpoint, l.error_class, {parsed}
FROM tasks t
LEFT JOIN results r ON r.idx = t.idx
LEFT JOIN (
    SELECT idx, COUNT(*) AS n, SUM(prompt_tokens) AS prompt, SUM(completion_tokens) AS completion,
           SUM(cached_tokens) AS cached, SUM(cost_usd) AS cost,
           SUM(cost_usd IS NULL AND prompt_tokens + completion_tokens > 0) AS unpriced,
           COALESCE(MAX(CASE WHEN outcome = 'ok' THEN id END), MAX(id)) AS shown
    FROM attempts WHERE idx >= ? AND idx < ? GROUP BY idx
) a ON a.idx = t.idx
LEFT JOIN attempts l ON l.id = a.shown
WHERE t.idx >= ? AND t.idx < ?
ORDER BY t.idx
"""


class JournalQueries:
    """The read side of `Journal`: its meta, tasks, attempts, results and totals."""

    def __init__(self, db: MaskedConnection) -> None:
        self._db = db

    def meta(self) -> dict[str, Any]:
        """The run's meta: its plan, job, parts, heartbeat (`run.plan` reads and writes them)."""
        return {k: json.loads(v) for k, v in self._db.execute("SELECT key, value FROM meta")}

    def tasks(self) -> list[TaskRow]:
        return [
            TaskRow(idx, cid, json.loads(body), TaskState(state), attempts)
            for idx, cid, body, state, attempts in self._db.execute(
                "SELECT idx, custom_id, body, state, attempts FROM tasks ORDER BY idx"
            )
        ]

    def task_window(self, first: int, end: int) -> list[tuple[int, str, dict[str, Any]]]:
        """(index, custom_id, body) of the tasks of index `first` to `end` (excluded), in order: one
        query on the primary key (`task_table.JournalTasks` reads bodies so)."""
        rows = self._db.execute(
            "SELECT idx, custom_id, body FROM tasks WHERE idx >= ? AND idx < ? ORDER BY idx", (first, end)
        )
        return [(idx, custom_id, json.loads(body)) for idx, custom_id, body in rows]

    def task_indices(self) -> array[int]:
        """Every task's index, in order, 8 bytes each (not a row of Python objects each)."""
        return array("q", (idx for (idx,) in self._db.execute("SELECT idx FROM tasks ORDER BY idx")))

    def body_of(self, index: int) -> dict[str, Any]:
        """One task's request body as journaled now (an agent's: its transcript so far)."""
        row = self._db.execute("SELECT body FROM tasks WHERE idx = ?", (index,)).fetchone()
        return json.loads(row[0]) if row else {}

    def spawned(self) -> list[tuple[int, str, Spawn]]:
        """Every task an agent spawned, in index order: (index, custom_id, the spawn that added it).
        A journal made before agents spawned agents has none (its tables lack the columns)."""
        try:
            rows = self._db.execute("SELECT idx, custom_id, spawn FROM tasks WHERE spawn IS NOT NULL ORDER BY idx")
            return [(idx, custom_id, Spawn(**json.loads(spawn))) for idx, custom_id, spawn in rows]
        except sqlite3.OperationalError:  # no such column: an older journal read as it is
            return []

    def first_model(self) -> str | None:
        """The model the first task's body names (a run's model when its profile names none)."""
        row = self._db.execute("SELECT json_extract(body, '$.model') FROM tasks ORDER BY idx LIMIT 1").fetchone()
        return row[0] if row and isinstance(row[0], str) else None

    def result_count(self) -> int:
        """How many tasks have their result kept (answers and final errors): what an export writes."""
        return int(self._db.execute("SELECT COUNT(*) FROM results").fetchone()[0])

    def states(self) -> dict[int, TaskState]:
        return {idx: TaskState(state) for idx, state in self._db.execute("SELECT idx, state FROM tasks")}

    def task_progress(self) -> tuple[dict[int, TaskState], dict[int, int]]:
        """Each task's state, and the attempts made of each (a resumed run's numbering goes on)."""
        states: dict[int, TaskState] = {}
        attempts: dict[int, int] = {}
        for idx, state, made in self._db.execute("SELECT idx, state, attempts FROM tasks"):
            states[idx] = TaskState(state)
            if made:
                attempts[idx] = made
        return states, attempts

    def counts(self) -> dict[str, int]:
        return dict(self._db.execute("SELECT state, COUNT(*) FROM tasks GROUP BY state").fetchall())

    def state_of(self, index: int) -> str | None:
        """One task's state as journaled (None: no such task)."""
        row = self._db.execute("SELECT state FROM tasks WHERE idx = ?", (index,)).fetchone()
        return str(row[0]) if row else None

    def failed_classes(self) -> dict[int, str]:
        """Each task that failed finally, with the class of its last attempt's error (`unknown`:
        none was classified): what `ctl status` counts and `ctl retry --errored CLASS` picks."""
        rows = self._db.execute(
            "SELECT r.idx, (SELECT a.error_class FROM attempts a WHERE a.idx = r.idx ORDER BY a.id DESC LIMIT 1) "
            "FROM results r WHERE r.ok = 0"
        )
        return {int(idx): str(kind or UNKNOWN_CLASS) for idx, kind in rows}

    def indices_of(self, custom_ids: Iterable[str]) -> dict[str, int]:
        """The index of each of these custom_ids the run holds (those it does not are left out)."""
        found: dict[str, int] = {}
        wanted = list(dict.fromkeys(custom_ids))
        for start in range(0, len(wanted), 500):  # SQLite's bound parameters, a window at a time
            window = wanted[start : start + 500]
            marks = ", ".join("?" * len(window))
            for cid, idx in self._db.execute(f"SELECT custom_id, idx FROM tasks WHERE custom_id IN ({marks})", window):
                found[str(cid)] = int(idx)
        return found

    def task_page(self, state: str | None, offset: int, limit: int) -> list[tuple[int, str, str, int]]:
        """(index, custom_id, state, attempts) of the tasks (in `state`, or all), in index order,
        from `offset` on, `limit` of them."""
        where, params = ("WHERE state = ?", [state]) if state is not None else ("", [])
        rows = self._db.execute(
            f"SELECT idx, custom_id, state, attempts FROM tasks {where} ORDER BY idx LIMIT ? OFFSET ?",
            (*params, limit, offset),
        )
        return [(int(idx), str(cid), str(st), int(made)) for idx, cid, st, made in rows]

    def result_page(
        self, ok: bool | None, offset: int, limit: int
    ) -> list[tuple[int, str, bool, str | None, str | None]]:
        """(index, custom_id, ok, answer JSON text, error JSON text) of the finished tasks (answered
        ones, failed ones or both), in index order, from `offset` on, `limit` of them."""
        where, params = ("WHERE r.ok = ?", [int(ok)]) if ok is not None else ("", [])
        rows = self._db.execute(
            "SELECT r.idx, t.custom_id, r.ok, r.response, r.error FROM results r JOIN tasks t ON t.idx = r.idx "
            f"{where} ORDER BY r.idx LIMIT ? OFFSET ?",
            (*params, limit, offset),
        )
        return [(int(idx), str(cid), bool(done), response, error) for idx, cid, done, response, error in rows]

    def recent_attempts(self, limit: int) -> list[tuple[str, str, str | None, float, str | None]]:
        """(endpoint, outcome, error class, latency ms, error message) of the last `limit` attempts
        journaled, newest first (an endpoint's health now, read without a scan)."""
        rows = self._db.execute(
            "SELECT endpoint, outcome, error_class, latency_ms, error_message FROM attempts ORDER BY id DESC LIMIT ?",
            (limit,),
        )
        return [(str(e), str(o), c, float(ms), m) for e, o, c, ms, m in rows]

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
        """A task's result: `ok`, `request_id`, `response` (the answer), `error`, and `parsed` (the
        answer's JSON value as its checks read it; None without)."""
        parsed = "parsed" if self._has_column("results", "parsed") else "NULL"
        row = self._db.execute(
            f"SELECT ok, request_id, response, error, {parsed} FROM results WHERE idx = ?", (index,)
        ).fetchone()
        if row is None:
            return None
        ok, request_id, response, error, value = row
        return {
            "ok": bool(ok),
            "request_id": request_id,
            "response": json.loads(response) if response else None,
            "error": json.loads(error) if error else None,
            "parsed": json.loads(value) if value else None,
        }

    def answer_head(self, index: int, size: int = 1024) -> str | None:
        """The first `size` characters of a task's kept answer (where a chat completion names its
        model: the traces read it, `otel.facts`), without reading the rest; None: no answer."""
        row = self._db.execute(
            "SELECT substr(response, 1, ?) FROM results WHERE idx = ? AND ok = 1", (size, index)
        ).fetchone()
        return row[0] if row else None

    def iter_result_texts(self) -> Iterator[tuple[str, bool, str | None, str | None, dict[str, Any] | None]]:
        """`iter_results` with each answer as the JSON text the journal keeps (for the export,
        which splices it in without reading it)."""
        for cid, ok, request_id, response, error, _ in self.iter_answer_rows():
            yield cid, ok, request_id, response, error

    def iter_answer_rows(
        self,
    ) -> Iterator[tuple[str, bool, str | None, str | None, dict[str, Any] | None, str | None]]:
        """`iter_result_texts` with each answer's `parsed` (its JSON value as the checks read it,
        as JSON text; None without, or in a journal made before it was kept)."""
        parsed = "r.parsed" if self._has_column("results", "parsed") else "NULL"
        for cid, ok, request_id, response, error, value in self._db.execute(
            f"SELECT t.custom_id, r.ok, r.request_id, r.response, r.error, {parsed} FROM results r "
            "JOIN tasks t ON t.idx = r.idx ORDER BY r.idx"
        ):
            yield cid, bool(ok), request_id, response, (json.loads(error) if error else None), value

    def has_parsed(self) -> bool:
        """A kept answer has a parsed value (the run checked its answers' JSON)."""
        if not self._has_column("results", "parsed"):
            return False
        return self._db.execute("SELECT 1 FROM results WHERE parsed IS NOT NULL LIMIT 1").fetchone() is not None

    def parsed_of(self, index: int) -> str | None:
        """A task's kept answer's JSON value as its checks read it (JSON text), None without."""
        if not self._has_column("results", "parsed"):
            return None
        row = self._db.execute("SELECT parsed FROM results WHERE idx = ? AND ok = 1", (index,)).fetchone()
        return row[0] if row else None

    def _has_column(self, table: str, column: str) -> bool:
        return any(row[1] == column for row in self._db.execute(f"PRAGMA table_info({table})"))

    def iter_results(self) -> Iterator[tuple[str, bool, str | None, dict[str, Any] | None, dict[str, Any] | None]]:
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

    def export_rows(self, first: int, end: int) -> list[ExportRow]:
        """The tasks of index `first` to `end` (excluded) as an export gives them back, in order:
        one query a window, so a million tasks are read a window at a time."""
        has_rows = any(row[1] == "row" for row in self._db.execute("PRAGMA table_info(tasks)"))
        query = _EXPORT_ROWS.format(  # a journal from before rows (or parsed values) were kept has NULLs
            row="t.row" if has_rows else "NULL", parsed="r.parsed" if self._has_column("results", "parsed") else "NULL"
        )
        return [_export_row(row) for row in self._db.execute(query, (first, end, first, end))]

    def task_index_bounds(self) -> tuple[int, int]:
        """(lowest, highest + 1) of the tasks' indices; (0, 0) with none."""
        low, high = self._db.execute("SELECT MIN(idx), MAX(idx) FROM tasks").fetchone()
        return (0, 0) if low is None else (int(low), int(high) + 1)

    def attempt_totals(self) -> dict[str, Any]:
        row = self._db.execute(
            "SELECT COUNT(*), SUM(outcome = 'retry' AND COALESCE(error_class, '') NOT IN "
            + _ANSWER_CLASSES  # an answer asked for again is counted apart (`answer_totals`)
            + "), SUM(error_class = ?), SUM(error_class = ?), "
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
            + "FROM attempts WHERE endpoint != 'cache'",  # a replay sent nothing, cost nothing
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

    def cache_totals(self) -> dict[str, Any] | None:
        """Calls replayed from the response cache (lane `cache`: answers, agents' steps, planner,
        aggregator and judge calls) and what they saved, every
        session; None when the run replayed none (or its journal predates the cache)."""
        if not any(row[1] == "saved_usd" for row in self._db.execute("PRAGMA table_info(attempts)")):
            return None
        hits, saved, unpriced = self._db.execute(
            "SELECT COUNT(*), COALESCE(SUM(saved_usd), 0), SUM(saved_usd IS NULL) FROM attempts "
            "WHERE endpoint = 'cache'"  # answers, agents' steps, direct calls
        ).fetchone()
        if not hits:
            return None
        return {"hits": hits, "saved_usd": round(saved, 6), "unpriced_hits": unpriced or 0}

    def abandoned_attempts(self) -> int:
        """Attempts the engine abandoned past the straggler deadline (and sent again), all sessions."""
        return int(self._db.execute("SELECT COUNT(*) FROM attempts WHERE error_code = 'straggler'").fetchone()[0])

    def spend(self) -> tuple[float, int]:
        """(what every attempt journaled so far cost, how many of them billed tokens at no known
        price): one pass over the attempts."""
        spent, unpriced = self._db.execute(
            "SELECT COALESCE(SUM(cost_usd), 0), "
            "COALESCE(SUM(cost_usd IS NULL AND prompt_tokens + completion_tokens > 0), 0) FROM attempts"
        ).fetchone()
        return float(spent), int(unpriced)

    def spent_usd(self) -> float:
        """What every attempt journaled so far cost (all sessions): the budget's starting point."""
        return float(self._db.execute("SELECT COALESCE(SUM(cost_usd), 0) FROM attempts").fetchone()[0])

    def stream_figures(self) -> dict[str, dict[str, list[float]]]:
        """Each endpoint's streamed answers: their time to first token (ms), tokens a second and mean
        gap between chunks (ms), each sorted; {} for a run that did not stream."""
        if not any(row[1] == "gap_ms" for row in self._db.execute("PRAGMA table_info(attempts)")):
            return {}  # a journal made before streams were measured, read without being opened for writing
        figures: dict[str, dict[str, list[float]]] = {}
        for endpoint, ttft, rate, gap in self._db.execute(
            "SELECT endpoint, ttft_ms, tokens_per_s, gap_ms FROM attempts WHERE outcome IN ('ok', 'step') "
            "AND ttft_ms IS NOT NULL"
        ):
            row = figures.setdefault(endpoint, {"ttft_ms": [], "tokens_per_s": [], "gap_ms": []})
            row["ttft_ms"].append(ttft)
            if rate is not None:
                row["tokens_per_s"].append(rate)
            if gap is not None:
                row["gap_ms"].append(gap)
        for row in figures.values():
            for values in row.values():
                values.sort()
        return figures

    def success_latencies(self) -> list[float]:
        return [
            r[0]  # a batch line's latency is its batch's hours, not a call's
            for r in self._db.execute(
                "SELECT latency_ms FROM attempts WHERE outcome = 'ok' AND endpoint NOT LIKE '%/batch' "
                "AND endpoint != 'cache' ORDER BY latency_ms"
            )
        ]

    def cost_of_indices_below(self, index: int) -> float:
        """What the calls journaled under indices below `index` cost (a side lane's: the judge's)."""
        row = self._db.execute("SELECT COALESCE(SUM(cost_usd), 0) FROM attempts WHERE idx < ?", (index,)).fetchone()
        return float(row[0])

    def answer_totals(self, escalation_prefix: str) -> dict[str, Any] | None:
        """What the answers' checks did, every session: attempts whose answer was not usable, by
        class and by what followed (asked again, given more room, sent to the escalation endpoint,
        or the task's end), the tasks that went to the escalation endpoint (`escalation_prefix`
        starts its name) and the cost on each side; None when no answer was ever refused."""
        rows = self._db.execute(
            "SELECT error_class, error_code, outcome, COUNT(*) FROM attempts WHERE error_class IN "
            + _ANSWER_CLASSES
            + " GROUP BY error_class, error_code, outcome"
        ).fetchall()
        escalated, escalated_cost, first_cost = self._db.execute(
            "SELECT COUNT(DISTINCT CASE WHEN endpoint LIKE ? THEN idx END), "
            "COALESCE(SUM(CASE WHEN endpoint LIKE ? THEN cost_usd END), 0), "
            "COALESCE(SUM(CASE WHEN endpoint NOT LIKE ? THEN cost_usd END), 0) FROM attempts WHERE idx >= 0",
            (escalation_prefix + "%",) * 3,
        ).fetchone()
        if not rows and not escalated:
            return None
        by_class = {str(kind): 0 for kind in sorted(ANSWER_ERRORS)}
        failed = dict(by_class)
        reasked = lengthened = 0
        for error_class, code, outcome, count in rows:
            by_class[error_class] = by_class.get(error_class, 0) + count
            if outcome == "failed":
                failed[error_class] = failed.get(error_class, 0) + count
            elif outcome == "retry" and code == "reask":
                reasked += count
            elif outcome == "retry" and code == "more_room":
                lengthened += count
        return {
            "unusable": by_class,
            "failed": failed,
            "reasked": reasked,
            "more_room": lengthened,
            "escalated": escalated or 0,
            "cost_usd": {"first": round(first_cost, 6), "escalated": round(escalated_cost, 6)},
        }

    # ----------------------------------------------------------------- a run's report (`report`)

    def time_span(self) -> tuple[float, float] | None:
        """(first start, last end) of the calls sent (epoch seconds); None before any ended."""
        first, last = self._db.execute(
            f"SELECT MIN(started_at), MAX({_ENDED}) FROM attempts WHERE endpoint != 'cache'"
        ).fetchone()
        return None if first is None else (float(first), float(last))

    def attempt_timeline(self, start: float, width_s: float) -> list[tuple[int, int, int, int, float]]:
        """(bin, requests, 429s, other errors, cost) of the calls sent, by the `width_s` bin of
        `start` their end falls in: what summary.json's `requests` counts, over time."""
        rows = self._db.execute(
            f"SELECT CAST(({_ENDED} - ?) / ? AS INTEGER) AS bin, COUNT(*), SUM(error_class = ?), "
            "SUM(outcome != 'ok' AND error_class IS NOT NULL AND error_class != ?), COALESCE(SUM(cost_usd), 0) "
            "FROM attempts WHERE endpoint != 'cache' GROUP BY bin ORDER BY bin",
            (start, width_s, ErrorClass.RATE_LIMIT, ErrorClass.RATE_LIMIT),
        )
        return [
            (int(b), int(n), int(limited or 0), int(errors or 0), float(cost)) for b, n, limited, errors, cost in rows
        ]

    def answer_timeline(self, start: float, width_s: float) -> list[tuple[int, int]]:
        """(bin, answers kept) by the `width_s` bin of `start` each was kept in."""
        rows = self._db.execute(
            "SELECT CAST((finished_at - ?) / ? AS INTEGER) AS bin, COUNT(*) FROM results WHERE ok = 1 "
            "GROUP BY bin ORDER BY bin",
            (start, width_s),
        )
        return [(int(b), int(n)) for b, n in rows]

    def error_classes(self) -> list[tuple[str, int]]:
        """Each error class of the failed attempts (all sessions), with how many, most first."""
        rows = self._db.execute(
            "SELECT error_class, COUNT(*) AS n FROM attempts WHERE error_class IS NOT NULL AND outcome != 'ok' "
            "GROUP BY error_class ORDER BY n DESC, error_class"
        )
        return [(str(name), int(n)) for name, n in rows]

    def error_examples(self, error_class: str, limit: int) -> list[dict[str, Any]]:
        """The first `limit` attempts of an error class, each with its task's id (no task: a
        planner's, an aggregator's or the judge's call)."""
        cursor = self._db.execute(
            "SELECT a.idx, t.custom_id, a.number, a.status, a.error_code, a.error_message, a.endpoint, a.started_at "
            "FROM attempts a LEFT JOIN tasks t ON t.idx = a.idx WHERE a.error_class = ? AND a.outcome != 'ok' "
            "ORDER BY a.id LIMIT ?",
            (error_class, limit),
        )
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor]

    def slowest_tasks(self, limit: int) -> list[tuple[int, str, float, int]]:
        """(index, custom_id, seconds from its first call to its answer, attempts) of the tasks that
        took longest to answer, slowest first."""
        rows = self._db.execute(
            f"SELECT a.idx, t.custom_id, MAX({_ENDED}) - MIN(a.started_at) AS took, COUNT(*) FROM attempts a "
            "JOIN tasks t ON t.idx = a.idx WHERE t.state = ? AND a.endpoint != 'cache' "
            "GROUP BY a.idx ORDER BY took DESC LIMIT ?",
            (TaskState.SUCCEEDED, limit),
        )
        return [(int(idx), str(cid), float(took), int(n)) for idx, cid, took, n in rows]

    def failed_tasks(self, limit: int) -> tuple[int, list[tuple[int, str]]]:
        """How many tasks failed finally, and the first `limit` of them: (index, custom_id)."""
        count = int(self._db.execute("SELECT COUNT(*) FROM tasks WHERE state = ?", (TaskState.FAILED,)).fetchone()[0])
        rows = self._db.execute(
            "SELECT idx, custom_id FROM tasks WHERE state = ? ORDER BY idx LIMIT ?", (TaskState.FAILED, limit)
        )
        return count, [(int(idx), str(cid)) for idx, cid in rows]

    def endpoint_latencies(self) -> dict[str, list[float]]:
        """Each endpoint's answered calls' latencies (ms), sorted (the batch lane and the cache are
        no endpoint a call waits on)."""
        latencies: dict[str, list[float]] = {}
        for endpoint, latency in self._db.execute(
            "SELECT endpoint, latency_ms FROM attempts WHERE outcome = 'ok' AND endpoint NOT LIKE '%/batch' "
            "AND endpoint != 'cache' ORDER BY endpoint, latency_ms"
        ):
            latencies.setdefault(str(endpoint), []).append(float(latency))
        return latencies

    def endpoint_totals(self) -> dict[str, dict[str, Any]]:
        """Per endpoint that was sent to (a batch endpoint and the cache are no door): requests,
        answers, 429s, other errors, latency p50/p95 of its answers (ms) and what it cost."""
        rows = self._db.execute(
            "SELECT endpoint, COUNT(*), SUM(outcome = 'ok'), SUM(error_class = ?), "
            "SUM(outcome != 'ok' AND error_class IS NOT NULL AND error_class != ?), COALESCE(SUM(cost_usd), 0) "
            "FROM attempts WHERE endpoint != 'cache' AND endpoint NOT LIKE '%/batch' "
            "GROUP BY endpoint ORDER BY endpoint",
            (ErrorClass.RATE_LIMIT, ErrorClass.RATE_LIMIT),
        ).fetchall()
        totals: dict[str, dict[str, Any]] = {}
        for endpoint, requests, answered, limited, errors, cost in rows:
            latencies = [
                r[0]
                for r in self._db.execute(
                    "SELECT latency_ms FROM attempts WHERE endpoint = ? AND outcome = 'ok' ORDER BY latency_ms",
                    (endpoint,),
                )
            ]
            totals[endpoint] = {
                "requests": requests,
                "answered": answered or 0,
                "rate_limited": limited or 0,
                "errors": errors or 0,
                "p50_ms": _rank(latencies, 0.50),
                "p95_ms": _rank(latencies, 0.95),
                "cost_usd": round(cost, 6),
            }
        return totals


_ANSWER_CLASSES = "(" + ", ".join(f"'{kind.value}'" for kind in sorted(ANSWER_ERRORS)) + ")"
"""The SQL list of the classes of answers that came back unusable (`core.call_errors.ANSWER_ERRORS`)."""


def _export_row(r: Any) -> ExportRow:
    """An `_EXPORT_ROWS` row as an `ExportRow` (its flags as booleans)."""
    ok = None if r[5] is None else bool(r[5])
    return ExportRow(
        r[0], r[1], r[2], r[3], r[4], ok, r[6], r[7], r[8], r[9], r[10], r[11], r[12], bool(r[13]), *r[14:18]
    )


_ENDED = "started_at + latency_ms / 1000.0"
"""When an attempt ended (epoch seconds, on its session's steady clock: `Attempt.started_at`)."""


def _rank(ordered: list[float], share: float) -> float | None:
    """The value at `share` of a sorted list (nearest rank), rounded to 0.1 ms; None when empty."""
    if not ordered:
        return None
    return round(ordered[min(len(ordered) - 1, int(share * len(ordered)))], 1)
