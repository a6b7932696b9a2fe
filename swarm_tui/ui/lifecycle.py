"""The run as the console's worker, and leaving the console: the app's part that starts the run,
hears its end, and decides how each way out (`q`, ctrl+c, a signal) leaves the run and the journal.

The run source (`LiveRun`: the engine of a `SwarmSession`; `AttachedRun`: a journal another
process writes) runs as the app's worker (`run_worker(source.run())`), so a crash in it is a
phase and a notice, not a traceback over the screen. Leaving keeps three promises:

* a run in flight is never dropped without a question (`q` asks; ctrl+c aborts at once, exit 130);
* the journal is never closed under the worker while it writes the run's outputs: a quit then
  waits for it (`finishing`), and the app exits when the worker ends (`exit_if_quitting`);
* a signal (SIGHUP, SIGTERM) stops the run gently, without the screen, as headless does.

Made with the app (a signal may come before the screen is up); what the end of the run shows is
the painter's (`painter.py`), told by the app when `worker_ended` says so.
"""

from __future__ import annotations

import asyncio
from typing import Any

from textual.app import App
from textual.worker import Worker, WorkerState

from swarm_tui.frontend.headless import STOP_GRACE_S, signalled_exit_code
from swarm_tui.frontend.source import RunSource
from swarm_tui.ui.screens.dialogs import ConfirmScreen

TOOLS_STARTING = "starting the job's tools (MCP servers, Python tools)…"


class RunLifecycle:
    """The run's worker and the ways out of the console (see the module's notes)."""

    def __init__(self, app: App[Any], source: RunSource, *, start: bool) -> None:
        """`start`: run the source at mount (False: a recorded run, or one shown as it stands)."""
        self._app = app
        self._source = source
        self._start = start
        self.worker: Worker[Any] | None = None
        """The run's worker (None before it starts, or when it never does)."""
        self._quitting = False
        self.signalled: str | None = None
        """The signal that stopped the run (SIGHUP, SIGTERM): it exits 130 once its outputs are written."""

    # ----------------------------------------------------------------- the run as the app's worker

    def begin(self) -> None:
        """At mount: the run started, or (not started here) its phase settled from its states."""
        if self._start:
            self.start()
        else:
            self._source.view.phases.settle(self._source.states)

    def start(self) -> None:
        """Run the source as the app's worker (again, after a retry or a resume of a run that ended)."""
        source = self._source
        phases = source.view.phases
        phases.phase, phases.detail = "STARTING", TOOLS_STARTING if source.has_tools else ""
        self.worker = self._app.run_worker(
            source.run(), name="swarm run", group="engine", exclusive=True, exit_on_error=False
        )

    def worker_ended(self, event: Worker.StateChanged) -> bool:
        """True when `event` says the run's worker is over; a crash is the phase and a notice."""
        if event.worker.group != "engine" or not event.worker.is_finished:
            return False
        if event.state is WorkerState.ERROR:
            error = event.worker.error
            phases = self._source.view.phases
            phases.phase, phases.detail = "CRASHED", f"{type(error).__name__}: {error}"
            self._app.notify(
                f"The run stopped on an error: {type(error).__name__}: {error}. The journal is intact: "
                f"swarm-tui resume {self._source.run_dir}",
                severity="error",
                timeout=30,
                markup=False,
            )
        return True

    @property
    def in_progress(self) -> bool:
        """The run's worker has started and not ended."""
        worker = self.worker
        return worker is not None and worker.state in (WorkerState.PENDING, WorkerState.RUNNING)

    @property
    def ended_well(self) -> bool:
        """No worker was started, or it returned (it neither crashed nor was cancelled)."""
        return self.worker is None or self.worker.state is WorkerState.SUCCESS

    @property
    def quitting(self) -> bool:
        """A quit waits for the run: its outputs written, or its calls cancelled."""
        return self._quitting

    def exit_code(self) -> int:
        """The run's exit code (the headless rule); 130 for a stop by signal with work left."""
        source = self._source
        return signalled_exit_code(source.exit_code(), self.signalled, source.output_error)

    def exit_if_quitting(self) -> None:
        """The worker ended: a quit that waited for it leaves now."""
        if self._quitting:
            self._app.exit(self.exit_code())

    # ----------------------------------------------------------------- leaving

    def quit(self) -> None:
        """`q`: a run in flight asks first; an attached view detaches; a run that is over quits."""
        app, source = self._app, self._source
        if not source.attached and not source.running and self._finishing():
            return  # it quits once the run's outputs are written
        if self._quitting or source.attached or not source.running:
            app.exit(source.exit_code())
            return
        stats = source.stats
        waiting = stats.total - stats.done - stats.in_flight - stats.batch_waiting
        batch = (
            f" Open provider batches run on at the provider ({stats.batch_waiting} lines waiting): resume "
            "collects them (a to cancel them instead)."
            if stats.batch_waiting
            else ""
        )

        def answered(yes: bool | None) -> None:
            if not yes:
                return
            if not source.running:
                app.exit(source.exit_code())
                return
            self._stop_and_quit("aborted by user (quit)")

        app.push_screen(
            ConfirmScreen(
                "A run is in flight. Quit?",
                f"{stats.in_flight} calls in flight and {max(0, waiting)} agents waiting will be stopped; "
                f"finished agents are kept.{batch} The journal stays resumable:\n  swarm-tui resume {source.run_dir}",
                yes="Quit",
            ),
            answered,
        )

    def help_quit(self) -> None:
        """Ctrl-C (Textual's own binding, which only says how to quit): what the README promises.
        A run in flight is aborted at once, no question asked (the journal stays resumable, exit
        130); an attached view detaches; a run that is over quits with its exit code."""
        app, source = self._app, self._source
        if source.attached:
            app.exit(source.exit_code())
        elif source.running and not self._quitting:
            self._stop_and_quit("interrupted by the user (ctrl+c)")
        elif not source.running and not self._finishing():
            app.exit(source.exit_code())

    def hang_up(self, signal_name: str) -> None:
        """SIGHUP (the SSH session dropped) or SIGTERM: as headless, stop gently. Nothing new is
        sent and the screen goes at once (its terminal may be gone: nothing more is drawn); the
        run goes on without it while the calls in flight have `STOP_GRACE_S` to answer, then the
        rest is cut and the outputs written (`launch.run_tui` waits for that; exit 130)."""
        source = self._source
        self.signalled = signal_name
        if not source.attached and source.running:
            source.stop_dispatch(
                f"stopped by {signal_name}: nothing new is sent, the calls in flight have {STOP_GRACE_S:g}s to answer"
            )
            source.outlive_app()
            reason = f"stopped by {signal_name}"
            asyncio.get_running_loop().call_later(STOP_GRACE_S, lambda: source.abort(reason, leave_batches=True))
        self._app.exit(source.exit_code())

    def _finishing(self) -> bool:
        """The engine is done but its worker still writes the run's outputs (results.jsonl of a
        big run takes seconds): quit when it has, not under it. True when the quit now waits."""
        worker = self.worker
        if worker is None or worker.is_finished:
            return False
        self._quitting = True
        self._app.notify("Writing results.jsonl and summary.json, then quitting…", timeout=10)
        return True

    def _stop_and_quit(self, reason: str) -> None:
        self._quitting = True
        self._source.abort(reason, leave_batches=True)
        self._app.notify("Stopping: cancelling in-flight calls, then quitting…", timeout=10)
