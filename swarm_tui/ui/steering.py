"""What the console's keys do: steering the run (retry, cancel, pause, abort, the ceiling), the
panes they open, and which of them make sense now (`check_action`, and `why_not` when one does
not). On the console's core (`console.py`: the layout and the event drain); `SwarmApp` (app.py)
binds the keys. Kept apart so each reads as one concern.

Every steering key works the same on a live run and an attached one (the run source forwards
it through the journal's control queue); an attached view of a run nobody drives offers to
resume it, in the background, and goes on watching it.
"""

from __future__ import annotations

import asyncio

from swarm_tui.core.events import TaskState
from swarm_tui.frontend.headless import STOP_GRACE_S
from swarm_tui.ui.drain import DrainingConsole
from swarm_tui.ui.screens.aggregate import AggregateScreen
from swarm_tui.ui.screens.detail import AgentDetailScreen
from swarm_tui.ui.screens.dialogs import ConfirmScreen
from swarm_tui.ui.screens.estimate import EstimateScreen
from swarm_tui.ui.screens.provider import ProviderScreen
from swarm_tui.view import actions
from swarm_tui.view.rules import any_unfinished, dead_attached

FOLLOW_MODES: tuple[str | None, ...] = (None, "active", "failed")
"""What the grid's cursor follows (`f` cycles): nothing, the first agent in flight, the last failure."""


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


class Steering(DrainingConsole):
    """The keys' actions, on the console's core (layout, drain); `SwarmApp` binds keys to them."""

    # ----------------------------------------------------------------- which keys make sense now

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The actions table's rule for the action (`view/actions.py`): the same rule dims its
        key, hides it from the palette and lets `why_not` say why."""
        if not hasattr(self, "grid"):
            return True
        return actions.enabled(action, self)

    def why_not(self, action: str) -> str | None:
        """Why a key whose action makes no sense now does nothing (None: no reason to give)."""
        return actions.why_not(action, self)

    # ----------------------------------------------------------------- retrying

    def retry_agents(self, indices: list[int] | None) -> list[int]:
        """Queue failed agents again (all when `indices` is None); restart the engine if it ended."""
        source = self.source
        if not source.can_steer:
            self.notify(
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
                self.notify(f"Nothing to retry: {states}.", markup=False)
            else:
                self.notify("Nothing to retry: no agent has failed.", markup=False)
            return []
        if not source.attached and not source.running:
            self._start_run()
        what = f"agent {queued[0] + 1}" if len(queued) == 1 else f"{len(queued)} failed agents"
        verb = "asked the running engine to retry" if source.attached else "retrying"
        self.notify(f"{verb.capitalize()} {what}{f' ({cost})' if cost else ''}.", timeout=3, markup=False)
        self.drain()
        return queued

    def retry_cost(self, indices: list[int]) -> str:
        """What retrying these agents would cost, said before it is done: each agent's last
        attempt's cost, or (an attempt that billed nothing, an error) the run's mean per answer."""
        stats = self.source.stats
        if not stats.cost_known:
            return "price unknown"
        mean = stats.cost_usd / stats.succeeded if stats.succeeded else None
        total, estimated = 0.0, False
        for index in indices[:50]:
            attempts = self.source.attempts_of(index)
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

    def action_retry_failed(self) -> None:
        if dead_attached(self.source):
            self._offer_background_resume(retry_failed=True)
            return
        self.retry_agents(None)

    def action_retry_cursor(self) -> None:
        index = self.grid.cursor_index
        if index is not None:
            self.retry_agents([index])

    def action_cancel_cursor(self) -> None:
        """`x`: stop the agent under the cursor; `R` starts it again (from its last completed step)."""
        index = self.grid.cursor_index
        if index is None:
            return
        if self.source.cancel([index]):
            again = self.key_hint("app.retry_agent")
            asked = "Asked the running engine to cancel" if self.source.attached else "Cancelled"
            self.notify(f"{asked} agent {index + 1}; {again} starts it again.", timeout=4, markup=False)
            self.drain()

    # ----------------------------------------------------------------- pause, abort, the ceiling

    def action_toggle_pause(self) -> None:
        source = self.source
        if dead_attached(source):
            self._offer_background_resume(retry_failed=False)
            return
        if not source.running:
            if not source.attached and any_unfinished(source):
                self.notify("Resuming the unfinished agents.", timeout=3)
                self._start_run()
            return
        if source.paused:
            source.resume()
            if source.attached:
                self.notify("Asked the running engine to resume.", timeout=3)
        else:
            source.pause()
            self.notify(
                f"Paused: nothing new is sent; in-flight calls finish. {self.key_hint('app.pause')} resumes."
                if not source.attached
                else "Asked the running engine to pause.",
                timeout=4,
            )
        self.drain()

    def _offer_background_resume(self, *, retry_failed: bool) -> None:
        """A run nobody drives, seen attached: resume it in the background, here, and go on
        watching it (it goes on after this view detaches)."""
        source = self.source
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
                self.notify(f"The resume did not start: {exc}", severity="error", markup=False)
                return
            if log is None:
                return
            self.notify(f"Resuming in the background: {command} (log: {log})", timeout=8, markup=False)

        self.push_screen(ConfirmScreen("Resume this run?", body, yes="Resume"), answered)

    def action_abort(self) -> None:
        source = self.source
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
                self.notify(
                    f"Aborting: cancelling in-flight calls{batches}…"
                    if not source.attached
                    else "Asked the running engine to abort.",
                    timeout=4,
                )
                self.drain()

        self.push_screen(ConfirmScreen(f"Abort {where}?", body, yes="Abort"), answered)

    def action_concurrency(self, direction: int) -> None:
        source = self.source
        ceiling = source.set_concurrency(concurrency_step(source.ceiling, direction), "user")
        asked = " (asked the running engine)" if source.attached else ""
        self.notify(
            f"Concurrency ceiling: {ceiling}{asked}. The adaptive limit (now {source.limit}) moves under it: "
            "up while calls are clean, down on 429s and timeouts.",
            timeout=4,
            markup=False,
        )
        self.drain()

    # ----------------------------------------------------------------- views

    def action_cycle_theme(self) -> None:
        cycle = self._theme_cycle or [self.theme]
        position = cycle.index(self.theme) if self.theme in cycle else -1
        self.theme = cycle[(position + 1) % len(cycle)]
        self.notify(f"Theme: {self.theme}", timeout=2)

    def action_toggle_heat(self) -> None:
        self.grid.heat = not self.grid.heat
        self.notify(
            "Latency heat view: done agents coloured from fastest to slowest fifth (the scale is beside "
            f"the grid); {self.key_hint('app.heat')} again for states."
            if self.grid.heat
            else "State view.",
            timeout=3,
        )
        self._last_second = float("-inf")
        self._tick_second()
        self.update_panels()

    def action_follow(self) -> None:
        """`f`: the grid's cursor follows the first agent in flight, then the last failure, then nothing."""
        position = FOLLOW_MODES.index(self.follow) if self.follow in FOLLOW_MODES else 0
        self.follow = FOLLOW_MODES[(position + 1) % len(FOLLOW_MODES)]
        what = {
            None: "Follow off: the cursor stays where you put it.",
            "active": "Following the active agents: the cursor moves to the first one in flight.",
            "failed": "Following failures: the cursor moves to each agent that fails.",
        }[self.follow]
        self.notify(f"{what} (a cursor key ends it)", timeout=3, markup=False)
        self._follow_cursor(force=True)
        self.update_panels()

    def action_provider(self) -> None:
        self.push_screen(ProviderScreen(self.config, self.source))

    def action_estimate(self) -> None:
        self.push_screen(EstimateScreen(self.source.stats, self.config, self.currency))

    def action_aggregate(self) -> None:
        self.push_screen(AggregateScreen(self.source.run_dir))

    def action_flush_memory(self) -> None:
        flushed = self.source.flush_memory()
        what = "asked the run to flush" if flushed is None else f"flushed {flushed} rounds of"
        self.notify(
            f"{what} the rolling memory; the next round starts from the shared context", title="Memory", markup=False
        )

    def open_agent(self, index: int) -> None:
        self.grid.move_to(index)
        self.push_screen(AgentDetailScreen(self.source, index))

    def follow_cursor(self, index: int) -> None:
        self.grid.move_to(index)

    # ----------------------------------------------------------------- leaving

    async def action_quit(self) -> None:
        source = self.source
        if not source.attached and not source.running and self._finishing():
            return  # it quits once the run's outputs are written
        if self._quitting or source.attached or not source.running:
            self.exit(source.exit_code())
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
                self.exit(source.exit_code())
                return
            self._stop_and_quit("aborted by user (quit)")

        self.push_screen(
            ConfirmScreen(
                "A run is in flight. Quit?",
                f"{stats.in_flight} calls in flight and {max(0, waiting)} agents waiting will be stopped; "
                f"finished agents are kept.{batch} The journal stays resumable:\n  swarm-tui resume {source.run_dir}",
                yes="Quit",
            ),
            answered,
        )

    def action_help_quit(self) -> None:
        """Ctrl-C (Textual's own binding, which only says how to quit): what the README promises.
        A run in flight is aborted at once, no question asked (the journal stays resumable, exit
        130); an attached view detaches; a run that is over quits with its exit code."""
        source = self.source
        if source.attached:
            self.exit(source.exit_code())
        elif source.running and not self._quitting:
            self._stop_and_quit("interrupted by the user (ctrl+c)")
        elif not source.running and not self._finishing():
            self.exit(source.exit_code())

    def _finishing(self) -> bool:
        """The engine is done but its worker still writes the run's outputs (results.jsonl of a
        big run takes seconds): quit when it has, not under it. True when the quit now waits."""
        worker = self._worker
        if worker is None or worker.is_finished:
            return False
        self._quitting = True
        self.notify("Writing results.jsonl and summary.json, then quitting…", timeout=10)
        return True

    def hang_up(self, signal_name: str) -> None:
        """SIGHUP (the SSH session dropped) or SIGTERM: as headless, stop gently. Nothing new is
        sent and the screen goes at once (its terminal may be gone: nothing more is drawn); the
        run goes on without it while the calls in flight have `STOP_GRACE_S` to answer, then the
        rest is cut and the outputs written (`launch.run_tui` waits for that; exit 130)."""
        source = self.source
        self.signalled = signal_name
        if not source.attached and source.running:
            source.stop_dispatch(
                f"stopped by {signal_name}: nothing new is sent, the calls in flight have {STOP_GRACE_S:g}s to answer"
            )
            source.outlive_app()
            reason = f"stopped by {signal_name}"
            asyncio.get_running_loop().call_later(STOP_GRACE_S, lambda: source.abort(reason, leave_batches=True))
        self.exit(source.exit_code())

    def _stop_and_quit(self, reason: str) -> None:
        self._quitting = True
        self.source.abort(reason, leave_batches=True)
        self.notify("Stopping: cancelling in-flight calls, then quitting…", timeout=10)

    def _explain_key(self, key: str) -> bool:
        """A key no binding took: if it is bound to an action that makes no sense now, say why
        (a hidden or dimmed key otherwise does nothing visible). True when it was explained."""
        bindings = self._bindings.copy()
        if self.keymap:
            bindings.apply_keymap(self.keymap)
        for binding in bindings.key_to_bindings.get(key, []):
            base, _, _ = binding.action.partition("(")
            if self.check_action(base, ()) is not True and (reason := self.why_not(base)):
                self.notify(reason, timeout=5, markup=False)
                return True
        return False
