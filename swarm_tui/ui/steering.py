"""What the console's keys do: steering the run (retry, cancel, pause, abort, the ceiling), the
views they switch (heat, follow), the panes they open (detail, help, provider, estimate,
aggregate) and the report they write (`w`, in a worker thread). The app's part behind its
`action_*` methods and the grid's and the error log's messages; which keys make sense now is the
actions table's (`view/actions.py`), asked through the app's `check_action`, and leaving is the
lifecycle's (`lifecycle.py`).

Every steering key works the same on a live run and an attached one (the run source forwards
it through the journal's control queue); an attached view of a run nobody drives offers to
resume it, in the background, and goes on watching it. Each key that changes the run drains at
once, so the grid shows the change without waiting for the painter's next tick.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.app import App

from swarm_tui.config import Config
from swarm_tui.core.errors import InputError
from swarm_tui.core.events import TaskState
from swarm_tui.frontend.source import RunSource
from swarm_tui.journal import IncompleteRunError
from swarm_tui.pricing.currency import DisplayCurrency
from swarm_tui.report import write_report
from swarm_tui.ui.follow import CursorFollow
from swarm_tui.ui.format import short_path
from swarm_tui.ui.keys import KeyManager
from swarm_tui.ui.layout import ConsoleLayout
from swarm_tui.ui.lifecycle import RunLifecycle
from swarm_tui.ui.painter import Painter
from swarm_tui.ui.screens.aggregate import AggregateScreen
from swarm_tui.ui.screens.detail import AgentDetailScreen
from swarm_tui.ui.screens.dialogs import ConfirmScreen, HelpScreen
from swarm_tui.ui.screens.estimate import EstimateScreen
from swarm_tui.ui.screens.provider import ProviderScreen
from swarm_tui.ui.widgets.grid.agent_grid import AgentGrid
from swarm_tui.view.failures import Failure
from swarm_tui.view.rules import any_unfinished, dead_attached


def concurrency_step(limit: int, direction: int) -> int:
    """The next limit for `+`/`-` on a ladder: 1-10 by 1, to 50 by 5, to 200 by 10, then by 50."""
    if direction > 0:
        for band_end, step in ((10, 1), (50, 5), (200, 10)):
            if limit < band_end:
                return (limit // step + 1) * step
        return (limit // 50 + 1) * 50
    for band_start, step in ((200, 50), (50, 10), (10, 5)):
        if limit > band_start:
            return max(band_start, -(-limit // step) * step - step)
    return max(1, limit - 1)


def small_usd(value: float) -> str:
    """A cost of one call or a few: `$0.00031`, `$0.0123`, `$1.25`."""
    if value < 0.01:
        return f"${value:.5f}"
    return f"${value:.4f}" if value < 10 else f"${value:,.2f}"


class Steering:
    """What the keys do to the run and the screen (see the module's notes)."""

    def __init__(
        self,
        app: App[Any],
        source: RunSource,
        *,
        config: Config,
        currency: DisplayCurrency,
        grid: AgentGrid,
        painter: Painter,
        layout: ConsoleLayout,
        follow: CursorFollow,
        lifecycle: RunLifecycle,
        keys: KeyManager,
    ) -> None:
        self._app = app
        self._source = source
        self._config = config
        self._currency = currency
        self._grid = grid
        self._painter = painter
        self._layout = layout
        self._follow = follow
        self._lifecycle = lifecycle
        self._keys = keys

    # ----------------------------------------------------------------- retrying

    def retry_agents(self, indices: list[int] | None) -> list[int]:
        """Queue failed agents again (all when `indices` is None); restart the engine if it ended."""
        app, source = self._app, self._source
        if not source.can_steer:
            app.notify(
                f"Nobody is running this journal: resume it with `swarm-tui resume {source.run_dir} --retry-failed`.",
                severity="warning",
                markup=False,
            )
            return []
        cost = self.retry_cost(indices) if indices else ""
        queued = source.retry(indices)
        if not queued:
            if indices:
                states = ", ".join(
                    f"agent {i + 1} is {source.states.get(i, TaskState.QUEUED).value}" for i in indices[:3]
                )
                app.notify(f"Nothing to retry: {states}.", markup=False)
            else:
                app.notify("Nothing to retry: no agent has failed.", markup=False)
            return []
        if not source.attached and not source.running:
            self._lifecycle.start()
        what = f"agent {queued[0] + 1}" if len(queued) == 1 else f"{len(queued)} failed agents"
        verb = "asked the running engine to retry" if source.attached else "retrying"
        app.notify(f"{verb.capitalize()} {what}{f' ({cost})' if cost else ''}.", timeout=3, markup=False)
        self._painter.drain()
        return queued

    def retry_cost(self, indices: list[int]) -> str:
        """What retrying these agents would cost, said before it is done: each agent's last
        attempt's cost, or (an attempt that billed nothing, an error) the run's mean per answer."""
        stats = self._source.stats
        if not stats.cost_known:
            return "price unknown"
        mean = stats.cost_usd / stats.succeeded if stats.succeeded else None
        total, estimated = 0.0, False
        for index in indices[:50]:
            attempts = self._source.attempts_of(index)
            last = attempts[-1].get("cost_usd") if attempts else None
            if last:
                total += last
            elif mean is not None:
                total, estimated = total + mean, True
            else:
                return ""
        if len(indices) > 50:
            total, estimated = total * len(indices) / 50, True
        if len(indices) == 1:
            return f"{'≈' if estimated else ''}{small_usd(total)}" + (
                ", the run's mean per answer" if estimated else ", its last attempt"
            )
        return f"≈{small_usd(total)} for {len(indices)}"

    def retry_failed(self) -> None:
        """`r`: every failed agent again (attached to a run nobody drives: resume it)."""
        if dead_attached(self._source):
            self._offer_background_resume(retry_failed=True)
            return
        self.retry_agents(None)

    def retry_cursor(self) -> None:
        """`R`: the agent under the cursor again."""
        index = self._grid.cursor_index
        if index is not None:
            self.retry_agents([index])

    def retry_from_log(self, index: int, indices: list[int]) -> None:
        """`R` on an error-log row: its agent (a group's: every failed one) again, the cursor on it."""
        self._grid.move_to(index)
        self.retry_agents(indices)

    def cancel_cursor(self) -> None:
        """`x`: stop the agent under the cursor; `R` starts it again (from its last completed step)."""
        index = self._grid.cursor_index
        if index is None:
            return
        source = self._source
        if source.cancel([index]):
            again = self._keys.hint("app.retry_agent")
            asked = "Asked the running engine to cancel" if source.attached else "Cancelled"
            self._app.notify(f"{asked} agent {index + 1}; {again} starts it again.", timeout=4, markup=False)
            self._painter.drain()

    # ----------------------------------------------------------------- pause, abort, the ceiling

    def toggle_pause(self) -> None:
        app, source = self._app, self._source
        if dead_attached(source):
            self._offer_background_resume(retry_failed=False)
            return
        if not source.running:
            if not source.attached and any_unfinished(source):
                app.notify("Resuming the unfinished agents.", timeout=3)
                self._lifecycle.start()
            return
        if source.paused:
            source.resume()
            if source.attached:
                app.notify("Asked the running engine to resume.", timeout=3)
        else:
            source.pause()
            app.notify(
                f"Paused: nothing new is sent; in-flight calls finish. {self._keys.hint('app.pause')} resumes."
                if not source.attached
                else "Asked the running engine to pause.",
                timeout=4,
            )
        self._painter.drain()

    def _offer_background_resume(self, *, retry_failed: bool) -> None:
        """A run nobody drives, seen attached: resume it in the background, here, and go on
        watching it (it goes on after this view detaches)."""
        app, source = self._app, self._source
        flag = " --retry-failed" if retry_failed else ""
        command = f"swarm-tui resume {source.run_dir}{flag} --headless"
        body = (
            f"Nobody is running this journal. This starts, in the background:\n  {command}\n"
            f"Its log goes to {source.run_dir / 'resume.log'}; this view follows the run, which goes on "
            "after you detach."
        )

        def answered(yes: bool | None) -> None:
            if not yes:
                return
            try:
                log = source.resume_in_background(retry_failed=retry_failed)
            except OSError as exc:
                app.notify(f"The resume did not start: {exc}", severity="error", markup=False)
                return
            if log is None:
                return
            app.notify(f"Resuming in the background: {command} (log: {log})", timeout=8, markup=False)

        app.push_screen(ConfirmScreen("Resume this run?", body, yes="Resume"), answered)

    def abort(self) -> None:
        """`a`: abort the run, after a question; the journal stays resumable."""
        app, source = self._app, self._source
        where = "the run in another process" if source.attached else "the run"
        batch = (
            f" Open provider batches are cancelled ({source.stats.batch_waiting} lines waiting); the lines they "
            "completed are kept."
            if source.stats.batch_waiting
            else ""
        )
        body = (
            f"In-flight calls are cancelled and nothing new is sent.{batch} Finished agents are kept; the journal "
            f"stays resumable:\n  swarm-tui resume {source.run_dir}"
        )

        def answered(yes: bool | None) -> None:
            if yes:
                batches = " and the open batches" if source.stats.batch_waiting else ""
                source.abort("aborted by user")
                app.notify(
                    f"Aborting: cancelling in-flight calls{batches}…"
                    if not source.attached
                    else "Asked the running engine to abort.",
                    timeout=4,
                )
                self._painter.drain()

        app.push_screen(ConfirmScreen(f"Abort {where}?", body, yes="Abort"), answered)

    def concurrency(self, direction: int) -> None:
        """`+`/`-`: the ceiling a step up or down the ladder (`concurrency_step`)."""
        source = self._source
        ceiling = source.set_concurrency(concurrency_step(source.ceiling, direction), "user")
        asked = " (asked the running engine)" if source.attached else ""
        self._app.notify(
            f"Concurrency ceiling: {ceiling}{asked}. The adaptive limit (now {source.limit}) moves under it: "
            "up while calls are clean, down on 429s and timeouts.",
            timeout=4,
            markup=False,
        )
        self._painter.drain()

    def flush_memory(self) -> None:
        """`m`: later rounds start from the shared context only."""
        flushed = self._source.flush_memory()
        what = "asked the run to flush" if flushed is None else f"flushed {flushed} rounds of"
        self._app.notify(
            f"{what} the rolling memory; the next round starts from the shared context", title="Memory", markup=False
        )

    # ----------------------------------------------------------------- views

    def toggle_heat(self) -> None:
        """`h`: the grid coloured by latency, or by state again."""
        grid = self._grid
        grid.heat = not grid.heat
        self._app.notify(
            "Latency heat view: done agents coloured from fastest to slowest fifth (the scale is beside "
            f"the grid); {self._keys.hint('app.heat')} again for states."
            if grid.heat
            else "State view.",
            timeout=3,
        )
        self._painter.tick_now()
        self._layout.update()

    def cycle_follow(self) -> None:
        """`f`: the grid's cursor follows the first agent in flight, then the last failure, then nothing."""
        said = self._follow.cycle()
        self._app.notify(f"{said} (a cursor key ends it)", timeout=3, markup=False)
        self._follow.apply(force=True)
        self._layout.update()

    def cursor_moved(self, *, by_user: bool) -> None:
        """The grid's cursor moved: by the user, it ends following; the panels and keys say what is under it."""
        if by_user and self._follow.stop():
            self._app.notify("Follow off: you moved the cursor.", timeout=2)
        self._layout.update()
        self._keys.refresh_if_changed()

    # ----------------------------------------------------------------- panes

    def open_agent(self, index: int) -> None:
        """An agent's detail, the grid's cursor on it (the palette's "agent N", the error log)."""
        self._grid.move_to(index)
        self.open_detail(index)

    def open_detail(self, index: int) -> None:
        self._app.push_screen(AgentDetailScreen(self._source, index))

    def open_failure(self, failure: Failure, index: int) -> None:
        """Enter on an error-log row: that agent's detail (nothing is sent); a planner's or an
        aggregator's row, which has no agent: its failure in full."""
        if failure.kind == "step":
            attempt = failure.attempt
            self._app.notify(
                f"{failure.agent_label} call {attempt.number}, {attempt.outcome}: {failure.error_class} "
                f"{attempt.status or ''}\n{failure.message}",
                title="Step error",
                severity="error",
                timeout=30,
                markup=False,
            )
            return
        self.open_agent(index)

    def help(self) -> None:
        source, keys = self._source, self._keys
        self._app.push_screen(
            HelpScreen(keys.help(), str(source.run_dir), short_path(self._config.path), keys.problems)
        )

    def provider(self) -> None:
        self._app.push_screen(ProviderScreen(self._config, self._source))

    def estimate(self) -> None:
        self._app.push_screen(EstimateScreen(self._source.stats, self._config, self._currency))

    def aggregate(self) -> None:
        self._app.push_screen(AggregateScreen(self._source.run_dir))

    # ----------------------------------------------------------------- the report

    def report(self) -> None:
        """`w`: the run's report (`swarm_tui.report`), written from its journal in a worker thread
        (a big run's takes seconds: the screen stays live), then said where."""
        run_dir = self._source.run_dir
        self._app.notify(f"Writing the report of {run_dir}…", timeout=3, markup=False)
        self._app.run_worker(lambda: self._write_report(run_dir), thread=True, group="report", exclusive=True)

    def _write_report(self, run_dir: Path) -> None:
        app = self._app
        try:
            written = write_report(run_dir)
        except ImportError as exc:
            app.call_from_thread(app.notify, f"No report: {exc}", severity="error", markup=False)
            return
        except (OSError, InputError, IncompleteRunError) as exc:
            app.call_from_thread(app.notify, f"The report was not written: {exc}", severity="error", markup=False)
            return
        snapshot = " (a snapshot of the run so far)" if written.status == "running" else ""
        app.call_from_thread(
            app.notify,
            f"Report written{snapshot}: {written.path} ({written.bytes / 1024:,.0f} KB); open it in a browser, "
            f"or: swarm-tui report {run_dir} --open",
            title="Report",
            timeout=10,
            markup=False,
        )
