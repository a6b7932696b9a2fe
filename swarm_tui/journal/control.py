"""The journal's control queue and heartbeat: how another process steers a run and sees it live.

`attach` and `ctl` (other processes, other terminals, scripts, the MCP server) write commands
(pause, resume, retry, abort, a new limit, stop...) into `control`; the running session takes
them as it polls, marks them taken and writes down what it did (`answer`), so the sender can
say what its command did. The heartbeat (in `meta`) says which process drives the run, and its
`Pulse` what the run is doing now (counts, rates, phase, limit), so that a view can tell a live
writer from a dead or stopped one, and `ctl status` can answer without replaying the log.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from swarm_tui.journal.writer import JournalWriter


@dataclass(frozen=True)
class Command:
    """A command put in the queue: its row's id, its name and its arguments (JSON)."""

    id: int
    name: str
    args: dict[str, Any]


@dataclass(frozen=True)
class CommandState:
    """Where a command sent stands: taken by the driving session (when), and what it did."""

    taken_at: float | None
    result: dict[str, Any] | None


@dataclass(frozen=True)
class Pulse:
    """What the session driving a run says of it at each heartbeat: its tasks by state and, of
    those not finished, what each waits on; the failed ones by the class of their last error;
    the phase, the pause, the limit; cost, rates and the ETA at this session's pace."""

    provider: str = ""
    model: str | None = None
    phase: str = ""
    phase_detail: str = ""
    paused: bool = False
    stopping: str | None = None
    """Why dispatch stopped (an abort, the budget...), while the calls in flight end."""
    limit: int | None = None
    ceiling: int | None = None
    total: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    """Tasks by state (`TaskState`'s values)."""
    waiting: dict[str, int] = field(default_factory=dict)
    """Unfinished tasks by what they wait on: `in_flight` (a call on the wire), `in_tools`, `in_batch`
    (a provider batch's line), `backoff` (a retry's delay), `queued`, `held` (cancelled, unfinished)."""
    failed_by_class: dict[str, int] = field(default_factory=dict)
    gate_s: float = 0.0
    """How long the provider's Retry-After still holds every call back."""
    cost_usd: float | None = None
    """What the run has cost so far, every session (None: a price is unknown)."""
    requests_per_s: float = 0.0
    tokens_per_s: float = 0.0
    eta_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Pulse:
        known = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        return cls(**known)


@dataclass(frozen=True)
class Heartbeat:
    """The meta's `heartbeat`: when the driving process last beat, its pid and session, and its pulse."""

    at: float
    pid: int | None
    session: int
    pulse: Pulse | None = None

    @classmethod
    def from_json(cls, data: object) -> Heartbeat | None:
        """The heartbeat a journal keeps (any version's: the pulse came later); None without one."""
        if not isinstance(data, Mapping) or not isinstance(data.get("at"), int | float):
            return None
        pid, session, pulse = data.get("pid"), data.get("session"), data.get("pulse")
        return cls(
            float(data["at"]),
            pid if isinstance(pid, int) else None,
            session if isinstance(session, int) else 0,
            Pulse.from_json(pulse) if isinstance(pulse, Mapping) else None,
        )


class ControlQueue:
    """The control queue and the heartbeat of `Journal`, written through its `writer`."""

    def __init__(self, writer: JournalWriter) -> None:
        self._writer = writer

    def send_command(self, command: str, args: Mapping[str, Any] | None = None) -> int:
        """Put a command in the queue; its id (`state_of` says when it is taken and what it did)."""
        with self._writer.writing():
            cursor = self._writer.db.execute(
                "INSERT INTO control (at, command, args) VALUES (?, ?, ?)",
                (time.time(), command, json.dumps(dict(args)) if args else None),
            )
        return int(cursor.lastrowid or 0)

    def take_commands(self) -> list[Command]:
        with self._writer.writing():
            db = self._writer.db
            rows = db.execute("SELECT id, command, args FROM control WHERE taken_at IS NULL ORDER BY id").fetchall()
            if rows:
                db.executemany("UPDATE control SET taken_at = ? WHERE id = ?", ((time.time(), row[0]) for row in rows))
        return [Command(int(i), str(name), json.loads(args) if args else {}) for i, name, args in rows]

    def answer(self, command_id: int, result: Mapping[str, Any]) -> None:
        """Write down what a command taken did (what its sender reads back)."""
        with self._writer.writing():
            self._writer.db.execute(
                "UPDATE control SET result = ? WHERE id = ?", (json.dumps(dict(result)), command_id)
            )

    def state_of(self, command_id: int) -> CommandState | None:
        """Where a command sent stands (None: no such command)."""
        row = self._writer.db.execute("SELECT taken_at, result FROM control WHERE id = ?", (command_id,)).fetchone()
        if row is None:
            return None
        taken_at, result = row
        return CommandState(taken_at, json.loads(result) if result else None)

    def heartbeat(self, pulse: Pulse | None = None) -> None:
        """Say who drives the run and, with a `pulse`, what it is doing now."""
        beat: dict[str, Any] = {"at": time.time(), "pid": os.getpid(), "session": self._writer.session}
        if pulse is not None:
            beat["pulse"] = pulse.to_json()
        self._writer.set_meta("heartbeat", beat)

    def last_heartbeat(self) -> Heartbeat | None:
        """The heartbeat the journal holds now (None: nobody has beaten)."""
        row = self._writer.db.execute("SELECT value FROM meta WHERE key = 'heartbeat'").fetchone()
        return Heartbeat.from_json(json.loads(row[0])) if row else None
