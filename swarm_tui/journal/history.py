"""The journal read: what the run did, beyond each task's state and answer.

Its event log (`log_since`, which views replay; `logged`, the events summary.json reads: the
failovers, the drifts, the judge's failures), what its multi-step agents did (steps, tool
calls, transcripts), its provider batches and the judge's verdicts.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator
from typing import Any

from swarm_tui.core import codec
from swarm_tui.core.batches import BatchRow
from swarm_tui.core.events import EngineEvent
from swarm_tui.journal.connection import MaskedConnection
from swarm_tui.journal.note_kinds import old_note
from swarm_tui.journal.schema import OLD_EVENTS_TABLE


class JournalHistory:
    """The read side of `Journal`: the log, agents, batches, verdicts."""

    def __init__(self, db: MaskedConnection) -> None:
        self._db = db

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

    def log_since(self, seq: int = 0, limit: int | None = None) -> list[tuple[int, float, EngineEvent]]:
        """(sequence number, epoch time, event) of the log after `seq`, in order."""
        query = "SELECT seq, at, kind, data FROM log WHERE seq > ? ORDER BY seq"
        rows = self._db.execute(query + (" LIMIT ?" if limit else ""), (seq, limit) if limit else (seq,))
        return [(n, at, codec.decode(kind, data)) for n, at, kind, data in rows]

    def run_ended(self) -> bool:
        """The log's last run (if any) logged its end: no session was killed mid-run."""
        row = self._db.execute(
            "SELECT kind FROM log WHERE kind IN ('RunStarted', 'RunFinished') ORDER BY seq DESC LIMIT 1"
        ).fetchone()
        return row is None or row[0] == "RunFinished"

    def has_log(self) -> bool:
        """The journal carries the event log from its first session (schema 2, or migrated)."""
        row = self._db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        return (json.loads(row[0]) if row else 1) >= 2

    def logged(self, *types: type) -> list[tuple[float, EngineEvent]]:
        """(epoch time, event) of every logged event of these types, in order. A journal of an
        older schema read as it is (read-only, so not migrated) gives its untyped notes too, as
        the typed events they became (`journal.note_kinds`)."""
        names = [t.__name__ for t in types]
        found: list[tuple[float, EngineEvent]] = []
        if self._has_table("log"):
            query = f"SELECT at, kind, data FROM log WHERE kind IN ({', '.join('?' * len(names))}) ORDER BY seq"
            found = [(at, codec.decode(kind, data)) for at, kind, data in self._db.execute(query, names)]
        rebuilt = not self.has_log()  # schema 1: its run events are not in a log either
        old = [
            (at, event)
            for _, at, _, kind, data in self.old_events()
            if (event := old_note(kind, data or {}, rebuilt=rebuilt)) is not None and isinstance(event, types)
        ]
        return sorted([*found, *old], key=lambda item: item[0]) if old else found

    def old_events(self, since_id: int = 0) -> list[tuple[int, float, int, str, dict[str, Any] | None]]:
        """(id, time, session, kind, data) of the untyped notes a journal of schema 1 or 2 kept in
        its `events` table (none once it is migrated: `journal.migrate`)."""
        if not self._has_table(OLD_EVENTS_TABLE):
            return []
        with contextlib.suppress(sqlite3.OperationalError):  # dropped meanwhile (a resume migrated it)
            return [
                (i, at, session, kind, json.loads(data) if data else None)
                for i, at, session, kind, data in self._db.execute(
                    f"SELECT id, at, session, kind, data FROM {OLD_EVENTS_TABLE} WHERE id > ? ORDER BY id",
                    (since_id,),
                )
            ]
        return []

    def _has_table(self, name: str) -> bool:
        query = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
        return self._db.execute(query, (name,)).fetchone() is not None
