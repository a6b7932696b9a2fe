"""Watch and steer a run that another process drives, through its journal. No Textual here.

`swarm-tui attach RUN_DIR` shows the same screen as the TUI that runs the swarm. The engine
writes every event it emits to the journal's log (`core/codec.py`), in order, in the
same transaction as the change it reports; a view here reads that log from a sequence number
and replays the very same events through the same code a live view runs (a `RunView`: the
`TaskBoard`, `RunStats`, figures, phase and agents' facts the screen paints). Nothing is
reconstructed, so an attached view shows what a live one shows, at any moment.

* `runlog.LogFollower` tails the log (a read-only connection: WAL readers never block the
  writer) into its `RunView`. When the writer died mid-run (kill -9, a power cut), the view
  closes the run as the next `resume` will: the calls in flight were lost, the waiting tasks
  are unfinished.
* `AttachedRun` is the run source the TUI drives for an attached view: the follower (its view),
  the liveness of the writer (heartbeat age, process alive) and the steering commands, written
  to the journal's control queue through a second, writable connection that `SwarmSession` in
  the running process polls.

A journal written before the log existed (schema 1) is read by `journal.migrate.JournalFollower`.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from pathlib import Path
from typing import Any

from swarm_tui.core.events import AgentStepped, EngineEvent, TaskState, ToolCallEnded
from swarm_tui.core.task import Task
from swarm_tui.engine.stats import RunStats
from swarm_tui.journal import Journal, JournalFollower
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.records import RunMeta
from swarm_tui.run.directory import lock_holder
from swarm_tui.run.exit_codes import EXIT_OK
from swarm_tui.view.follower import Listener, LogFollower
from swarm_tui.view.run_view import RunView

POLL_S = 0.5
HEARTBEAT_STALE_S = 3.0
"""The writer beats every 0.5 s; three seconds of silence means nobody drives the run."""


# --------------------------------------------------------------------------- the attached view


def process_alive(pid: int | None) -> bool | None:
    """True/False for a pid on this machine; None when it cannot be told."""
    if not pid:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return None
    return True


def process_stopped(pid: int | None) -> bool | None:
    """Whether `pid` is stopped (SIGSTOP, Ctrl-Z, a debugger), from /proc; None where it cannot be told."""
    if not pid:
        return None
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    state = stat.rpartition(")")[2].split()[:1]  # the name in parentheses may hold spaces
    return bool(state) and state[0] in ("T", "t")


class AttachedRun:
    """A run driven by another process, seen through its journal: a run source for the TUI.

    Steering writes commands into the journal's control queue; the running session applies
    them within half a second, and their effect comes back through the journal (a `paused`
    event, requeued tasks...), so what the screen shows is what the engine did.
    """

    attached = True

    def __init__(self, run_dir: Path, *, clock: Callable[[], float] = time.time) -> None:
        self.run_dir = Path(run_dir)
        self.journal = Journal.open(self.run_dir, readonly=True)
        self.meta = RunMeta.read(self.journal)  # the stored plan, without starting anything
        self.plan = self.meta.plan
        self.job_name = self.meta.job.name or self.run_dir.name
        self.tasks: MutableMapping[int, Task] = self.journal.task_table()  # bodies read when shown
        self.profile: ProviderProfile = self.plan.profile
        self.settings = self.plan.settings
        self.model = self.plan.model
        self.simulated = self.profile.is_simulator
        self.base_url = "embedded simulator" if self.simulated else self.profile.base_url
        self._wall_clock = clock
        indices = list(self.tasks)
        self.follower: LogFollower | JournalFollower
        self.view: RunView
        """The run as its log tells it (a `LogFollower` is one): what the screen paints."""
        if self.journal.history.has_log():
            self.follower = self.view = LogFollower(self.journal, indices, clock=self._stats_clock)
        else:  # a schema-1 journal: its follower rebuilds events from rows, and keeps the states
            legacy = JournalFollower(self.journal, indices, provider=self.profile.name, simulated=self.simulated)
            self.follower, self.view = legacy, RunView(states=legacy.view, clock=self._stats_clock)
            legacy.subscribe(lambda event: self.view.observe(event, legacy.now))
        self._grown: set[int] = set()
        self.follower.subscribe(self._note_growth)
        self._commands: Journal | None = None
        self.resumer: subprocess.Popen[bytes] | None = None
        """A `swarm-tui resume` this view started for a run nobody drove (`resume_in_background`)."""

    # ----------------------------------------------------------------- what the UI reads

    @property
    def states(self) -> Mapping[int, TaskState]:
        return self.view.states

    @property
    def stats(self) -> RunStats:
        return self.view.stats

    @property
    def fatal(self) -> str | None:
        return None  # the writer's own trouble is its to say; this view reads what it journaled

    def subscribe(self, listener: Listener) -> None:
        self.follower.subscribe(listener)

    def _stats_clock(self) -> float:
        if self.follower.now is not None:
            return self.follower.now
        ended = self.follower.last_at if isinstance(self.follower, LogFollower) else self.follower.last_ended
        if not self.live and ended is not None:
            return ended  # a run nobody drives: elapsed stops where it ended
        return self._wall_clock()

    @property
    def heartbeat_age_s(self) -> float | None:
        beat = self.follower.heartbeat
        if not beat or "at" not in beat:
            return None
        return max(0.0, self._wall_clock() - beat["at"])

    @property
    def live(self) -> bool:
        """Someone is driving the run right now (a fresh heartbeat, and no final 'finished')."""
        age = self.heartbeat_age_s
        if age is None or age > HEARTBEAT_STALE_S or self.follower.finished is not None:
            return False
        return process_alive((self.follower.heartbeat or {}).get("pid")) is not False

    @property
    def running(self) -> bool:
        return self.live

    @property
    def can_steer(self) -> bool:
        return self.live

    @property
    def paused(self) -> bool:
        return self.follower.paused

    @property
    def limit(self) -> int:
        return self.follower.limit or self.settings.pacing.concurrency

    @property
    def ceiling(self) -> int:
        return self.follower.ceiling or self.limit

    @property
    def straggler_s(self) -> float | None:
        return None  # the engine's tail figures are not journaled until the run ends (summary.json)

    @property
    def in_flight_known(self) -> bool:
        if isinstance(self.follower, LogFollower):
            return True  # every call's start is logged
        return self.follower.in_flight is not None

    def _note_growth(self, event: EngineEvent) -> None:
        if isinstance(event, AgentStepped | ToolCallEnded):
            self._grown.add(event.index)

    def _writer_gone(self) -> bool:
        """The process that started the run is not running it any more (killed, or lost): its
        heartbeat is stale (the pid alone could be an earlier session's while a new one starts),
        and nobody holds the run's lock (a writer stopped with SIGSTOP beats no more, but holds it)."""
        age = self.heartbeat_age_s
        if age is None:  # no heartbeat yet: give a starting writer time to beat
            last = self.follower.last_at if isinstance(self.follower, LogFollower) else None
            stale = last is not None and self._wall_clock() - last > HEARTBEAT_STALE_S
        else:
            stale = age > HEARTBEAT_STALE_S
        return stale and self.holder() is None

    def holder(self) -> int | None:
        """The pid of a process holding the run's lock (None: nobody), asked only when the
        heartbeat is stale (a live writer's beat says it is there)."""
        return lock_holder(self.run_dir)

    @property
    def resumable(self) -> bool:
        """Nobody drives the run and nobody holds it: a resume would be taken (a stopped writer's
        lock would refuse one, so none is offered)."""
        return not self.live and self.holder() is None

    def liveness(self, short: bool = False) -> str:
        """Who drives this journal, in a few words (the status panel puts the phase before it,
        and the resume command, when there is work left, on a line of its own). `short`: for a
        narrow panel (no pid: it fits one line at 80x24)."""
        age = self.heartbeat_age_s
        beat = self.follower.heartbeat or {}
        if self.follower.finished is not None:
            return "the run that wrote it has ended"
        if age is None:
            return "no heartbeat: never run, or run by an older swarm-tui"
        if self.live:
            return f"live · beat {age:.1f}s ago" if short else f"live · pid {beat.get('pid')} · beat {age:.1f}s ago"
        holder = self.holder()
        if holder is not None:  # silent, but it holds the run: stopped or stuck, not dead
            pid = holder or beat.get("pid")
            if process_stopped(pid):
                return (
                    f"stopped (SIGSTOP?) · pid {pid}"
                    if short
                    else (f"stopped (SIGSTOP?) — pid {pid}: it goes on when continued (kill -CONT {pid} or fg)")
                )
            return (
                f"silent {age:.0f}s · pid {pid}" if short else f"pid {pid} holds the run but is silent for {age:.0f}s"
            )
        alive = process_alive(beat.get("pid"))
        return "its process is gone" if alive is False else f"nobody running it: silent for {age:.0f}s"

    def eta_s(self) -> float | None:
        """At the pace of the session that writes the run now."""
        return self.view.pace.eta_s() if self.live and not self.paused else None

    def task_of(self, index: int) -> Task | None:
        return self.tasks.get(index)

    def attempts_of(self, index: int) -> list[dict[str, Any]]:
        return self.journal.queries.attempts_of(index)

    def result_of(self, index: int) -> dict[str, Any] | None:
        return self.journal.queries.result_of(index)

    # ----------------------------------------------------------------- the poll loop

    async def run(self) -> None:
        """Follow the journal until cancelled (the attached view never ends the run)."""
        while True:
            self.poll()
            await asyncio.sleep(POLL_S)

    def poll(self) -> int:
        delivered = self.follower.poll()
        if isinstance(self.follower, LogFollower) and self.follower.started and self._writer_gone():
            beat = self.follower.heartbeat or {}
            delivered += self.follower.close_interrupted(beat.get("at") or self.follower.last_at or time.time())
        if len(self.states) != len(self.tasks):  # tasks joined the run: read them
            self.tasks = self.journal.task_table()
            self.stats.total = len(self.tasks)
        else:  # agents whose transcript grew (a step, a tool result): read theirs
            for index in self._grown:
                task = self.tasks.get(index)
                if task is not None:
                    self.tasks[index] = Task(index, task.custom_id, self.journal.queries.body_of(index))
        self._grown.clear()
        return delivered

    # ----------------------------------------------------------------- steering (control queue)

    def _send(self, command: str, args: dict[str, Any] | None = None) -> None:
        if self._commands is None:
            self._commands = Journal.open(self.run_dir)
        self._commands.control.send_command(command, args)

    def pause(self) -> None:
        self._send("pause")

    def resume(self) -> None:
        self._send("resume")

    def abort(self, reason: str = "aborted from an attached view", *, leave_batches: bool = False) -> None:
        self._send("abort")

    def set_concurrency(self, limit: int, reason: str = "attached view") -> int:
        limit = max(1, limit)
        self._send("concurrency", {"limit": limit})
        return limit

    @property
    def has_memory(self) -> bool:
        swarm = self.meta.swarm
        return swarm is not None and swarm.memory.rounds > 1

    @property
    def has_aggregate_step(self) -> bool:
        swarm = self.meta.swarm
        return swarm is not None and swarm.aggregate is not None

    @property
    def has_tools(self) -> bool:
        return False  # the running process starts them; this view only reads its journal

    def flush_memory(self) -> int | None:
        """Ask the running session to flush its rolling memory (how many rounds is not known here)."""
        self._send("flush_memory")
        return None

    def retry(self, indices: Iterable[int] | None = None) -> list[int]:
        """Ask the running engine to requeue failed tasks; returns those asked for."""
        chosen = [i for i in (self.states if indices is None else indices) if self.states.get(i) is TaskState.FAILED]
        if chosen:
            self._send("retry", {"indices": chosen} if indices is not None else None)
        return chosen

    def cancel(self, indices: Iterable[int]) -> list[int]:
        """Ask the running engine to cancel these agents; returns those asked for."""
        chosen = [i for i in indices if not self.states.get(i, TaskState.QUEUED).is_final]
        if chosen:
            self._send("cancel", {"indices": chosen})
        return chosen

    def resume_in_background(self, *, retry_failed: bool = False) -> Path:
        """A run nobody drives: start `swarm-tui resume RUN_DIR --headless` as a process of its own
        (its own session: it outlives this view and the terminal), its output appended to
        RUN_DIR/resume.log; this view then follows it through the journal as any writer.
        Returns the log's path."""
        log = self.run_dir / "resume.log"
        command = [sys.executable, "-m", "swarm_tui", "resume", str(self.run_dir.resolve()), "--headless"]
        if retry_failed:
            command.append("--retry-failed")
        with open(log, "ab") as out:
            self.resumer = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        return log

    def resume_failed(self) -> str | None:
        """Why a resume started here ended without the run going live (its log's last line), once."""
        resumer = self.resumer
        if resumer is None or resumer.poll() is None or resumer.returncode == 0:
            return None
        self.resumer = None
        try:
            lines = (self.run_dir / "resume.log").read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            lines = []
        last = next((line for line in reversed(lines) if line.strip()), "")
        return f"the resume exited {resumer.returncode}: {last}" if last else f"the resume exited {resumer.returncode}"

    def exit_code(self) -> int:
        return EXIT_OK  # leaving an attached view detaches; it says nothing about the run

    output_error = None
    """An attached view writes no outputs."""

    def outlive_app(self) -> None:
        """An attached view drives no run: nothing goes on after it."""

    async def finished(self) -> None:
        return None

    def stop_dispatch(self, reason: str) -> None:
        """Ask the running engine, through the journal, to send nothing new (its calls in flight finish)."""
        self._send("stop", {"reason": reason})

    async def aclose(self) -> None:
        self.journal.close()
        if self._commands is not None:
            self._commands.close()
