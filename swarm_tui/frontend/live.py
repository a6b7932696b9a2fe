"""`LiveRun`: this process runs the swarm (a `SwarmSession`), as a run source for the console.
No Textual.

Its `RunView` reads the engine's own board and `RunStats` (the engine moves them with every event
it emits) and is fed the engine's events as they are emitted; a resumed run's earlier sessions
are shown first, from the journal's log (`runlog.earlier_session_events`). The engine runs as the app's
worker (`run`), and can outlive the app when its terminal goes away (`outlive_app`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from swarm_tui.core.events import EngineEvent, TaskState
from swarm_tui.core.ports import Capability
from swarm_tui.core.task import Task
from swarm_tui.engine import RunStats
from swarm_tui.run.exit_codes import exit_code
from swarm_tui.run.session import SwarmSession
from swarm_tui.view.follower import earlier_session_events
from swarm_tui.view.run_view import RunView


class LiveRun:
    """This process runs the swarm: a `SwarmSession` whose engine runs as the app's worker."""

    attached = False
    in_flight_known = True
    can_steer = True

    def __init__(self, session: SwarmSession) -> None:
        self.session = session
        self._run: asyncio.Future[Any] | None = None
        self._outlives_app = False
        self.engine = session.engine
        self.run_dir = session.run_dir
        self.job_name = session.job_name
        self.profile = session.plan.profile
        self.settings = session.plan.settings
        self.model = session.model
        self.simulated = session.simulated
        self.base_url = "embedded simulator" if session.simulated else session.client.base_url
        self.view = RunView(states=self.engine.states, stats=self.engine.stats)
        stats = self.engine.stats
        if stats.sent == 0 and session.has_history:
            # A resumed run: count what earlier sessions did, so the footer agrees with the grid,
            # and show it (its error log, its scores, its batches) before this session's own.
            self.view.replay((None, event) for event in earlier_session_events(session.journal, stats))
        if not stats.total:
            stats.total = len(self.tasks)
        adaptive = self.engine.adaptive
        self.view.figures.limit = self.engine.admission.limit
        self.view.figures.ceiling = adaptive.ceiling if adaptive else None
        self.engine.subscribe(self.view.observe)

    @property
    def stats(self) -> RunStats:
        return self.view.stats

    @property
    def states(self) -> Mapping[int, TaskState]:
        return self.engine.states

    @property
    def running(self) -> bool:
        return self.engine.running

    @property
    def paused(self) -> bool:
        return self.view.figures.paused

    @property
    def limit(self) -> int:
        return self.view.figures.limit or self.engine.admission.limit

    @property
    def ceiling(self) -> int:
        """The user's limit; the adaptive controller works under it."""
        return self.view.figures.ceiling or self.limit

    @property
    def resumable(self) -> bool:
        """This process drives the run: a stopped one goes on here (`p`, `r`), not in the background."""
        return False

    @property
    def straggler_s(self) -> float | None:
        """The straggler deadline now (None until enough answers; a Ray run keeps it on its shards)."""
        tail = self.engine.tail
        return tail.typical_straggler_s() if tail is not None else None

    def subscribe(self, listener: Callable[[EngineEvent], None]) -> None:
        self.engine.subscribe(listener)

    async def run(self) -> Any:
        """The session's run, as the app's worker. It ends with the worker (a quit cancels it),
        unless `outlive_app` was asked for: then it goes on after the app has gone (`finished`).
        Run again (`p` or `r` once it ended), it goes on past the stop that ended it."""
        if self._run is not None:
            self.engine.go_on()
        self._run = asyncio.ensure_future(self.session.run())
        try:
            return await asyncio.shield(self._run)
        except asyncio.CancelledError:
            if not self._outlives_app:
                self._run.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._run
            raise

    def outlive_app(self) -> None:
        """The terminal went away (SIGHUP): the run goes on without a screen until it ends."""
        self._outlives_app = True

    async def finished(self) -> None:
        """Wait for a run that outlived the app (its outputs written); at once otherwise."""
        if self._outlives_app and self._run is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._run

    def pause(self) -> None:
        self.engine.pause()

    def resume(self) -> None:
        self.engine.resume()

    def stop_dispatch(self, reason: str) -> None:
        """Send nothing new; the calls in flight finish (a stop by signal: the user's)."""
        self.session.stop_by_user(reason)

    @property
    def output_error(self) -> str | None:
        return self.session.output_error

    @property
    def fatal(self) -> str | None:
        """Why the run cannot go on (its journal cannot be written), if so."""
        return self.engine.fatal

    def abort(self, reason: str = "aborted by user", *, leave_batches: bool = False) -> None:
        self.engine.abort(reason, leave_batches=leave_batches)

    def set_concurrency(self, limit: int, reason: str = "user") -> int:
        return self.engine.set_concurrency(limit, reason)

    def retry(self, indices: Iterable[int] | None = None) -> list[int]:
        return self.engine.retry_failed(indices)

    def cancel(self, indices: Iterable[int]) -> list[int]:
        if Capability.CANCEL not in self.engine.capabilities:
            return []
        return self.engine.cancel_tasks(indices)

    @property
    def tasks(self) -> Mapping[int, Task]:
        """The run's tasks so far: a planned swarm gains its agents when the planner answers."""
        return self.session.tasks

    def task_of(self, index: int) -> Task | None:
        """One task as it stands now (an agent's body grows with its transcript)."""
        return self.engine.tasks.get(index)

    @property
    def has_memory(self) -> bool:
        """A multi-round swarm: its rolling memory can be flushed."""
        pipeline = self.session.pipeline
        return pipeline is not None and pipeline.spec.memory.rounds > 1

    def flush_memory(self) -> int | None:
        return self.session.pipeline.flush_memory() if self.session.pipeline else None

    @property
    def has_aggregate_step(self) -> bool:
        """A swarm job with an `[aggregate]` step (it writes aggregate.md once its last round is done)."""
        swarm = self.session.swarm
        return swarm is not None and swarm.aggregate is not None

    @property
    def has_tools(self) -> bool:
        """The job's agents have tools (MCP servers, Python tools) that start with the run."""
        return self.session.tools is not None

    def eta_s(self) -> float | None:
        """Remaining tasks at this session's pace; None while paused (no pace then)."""
        if not self.engine.running or self.paused:
            return None
        return self.view.pace.eta_s()

    def liveness(self, short: bool = False) -> str:
        return "this process" if short else f"this process (pid {os.getpid()})"

    def attempts_of(self, index: int) -> list[dict[str, Any]]:
        return self.session.journal.queries.attempts_of(index)

    def result_of(self, index: int) -> dict[str, Any] | None:
        return self.session.journal.queries.result_of(index)

    def resume_in_background(self, *, retry_failed: bool = False) -> Path | None:
        """This process drives the run: nothing to start elsewhere."""
        return None

    def resume_failed(self) -> str | None:
        return None

    def exit_code(self) -> int:
        """The one rule (`run.exit_codes.exit_code`): outputs not written is never a success."""
        return exit_code(self.engine.outcome(), self.session.output_error)

    async def aclose(self) -> None:
        await self.session.aclose()
