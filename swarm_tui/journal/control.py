"""The journal's control queue and heartbeat: how another process steers a run and sees it live.

`attach` (another process, another terminal) writes commands (pause, resume, retry, abort, a new
limit, stop...) into `control`; the running session takes them as it polls and marks them taken.
The heartbeat (in `meta`) says which process drives the run and what it has in flight, so that a
view can tell a live writer from a dead or stopped one.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from swarm_tui.journal.writer import JournalWriter


class ControlQueue:
    """The control queue and the heartbeat of `Journal`, written through its `writer`."""

    def __init__(self, writer: JournalWriter) -> None:
        self._writer = writer

    def send_command(self, command: str, args: dict[str, Any] | None = None) -> None:
        with self._writer.writing():
            self._writer.db.execute(
                "INSERT INTO control (at, command, args) VALUES (?, ?, ?)",
                (time.time(), command, json.dumps(args) if args else None),
            )

    def take_commands(self) -> list[tuple[str, dict[str, Any]]]:
        with self._writer.writing():
            db = self._writer.db
            rows = db.execute("SELECT id, command, args FROM control WHERE taken_at IS NULL ORDER BY id").fetchall()
            if rows:
                db.executemany("UPDATE control SET taken_at = ? WHERE id = ?", ((time.time(), row[0]) for row in rows))
        return [(command, json.loads(args) if args else {}) for _, command, args in rows]

    def heartbeat(self, **state: Any) -> None:
        """Say who drives the run and what is in flight now (attempts are journaled when they end)."""
        beat = {"at": time.time(), "pid": os.getpid(), "session": self._writer.session, **state}
        self._writer.set_meta("heartbeat", beat)
