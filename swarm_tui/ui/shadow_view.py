"""The live view of `swarm-tui shadow`: the primary (judged, all traffic) and the secondary (its
mirrored baseline) side by side while traffic flows.

`ShadowRun` (no Textual) does the work as this app's worker and hands a snapshot to
`on_update`; the callback only keeps the latest one, and a 4 Hz timer renders it. `s` stops
early (the report is still written), `q` leaves once the verdict is in.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import ScrollableContainer
from textual.widgets import Footer, ProgressBar, Static

from swarm_tui.shadow import ADOPT, PENDING, ShadowReport, ShadowRun, format_report, verdict_meaning

REFRESH_S = 0.25


class ShadowApp(App[ShadowReport | None]):
    TITLE = "swarm-tui shadow"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "stop", "Stop early", id="shadow.stop"),
        Binding("q", "quit_view", "Quit", id="shadow.quit"),
    ]
    DEFAULT_CSS = """
    #shadow-head { background: $panel; padding: 0 1; text-style: bold; }
    #shadow-progress { padding: 0 1; height: 1; }
    #shadow-verdict { padding: 0 1; height: 1; text-style: bold; }
    .adopt { color: $success; }
    .rollback { color: $error; }
    ScrollableContainer { padding: 0 1; }
    """

    def __init__(self, run: ShadowRun, *, theme: str | None = None) -> None:
        super().__init__()
        self.shadow = run
        run.on_update = self._remember
        self._latest: ShadowReport | None = None
        self._final: ShadowReport | None = None
        if theme and theme in self.available_themes:
            self.theme = theme

    def compose(self) -> ComposeResult:
        primary, secondary = (ep.profile.name for ep in self.shadow.endpoints)
        rate = self.shadow.config.rate
        yield Static(
            Text(
                f"shadow: judging the primary {primary} (all traffic) against the secondary {secondary} "
                f"(the baseline, {rate:.0%} mirrored, its cost kept apart); "
                f"ROLLBACK = go back to {secondary}"
            ),
            id="shadow-head",
        )
        yield ProgressBar(total=self.shadow.config.duration_s, show_eta=True, id="shadow-progress")
        yield Static("verdict: PENDING", id="shadow-verdict", markup=False)
        with ScrollableContainer():
            yield Static(Text("waiting for the first answers...", no_wrap=True), id="shadow-report")
        yield Footer()

    def on_mount(self) -> None:
        self.run_worker(self._drive(), name="shadow", exit_on_error=True)
        self.set_interval(REFRESH_S, self._render)

    async def _drive(self) -> None:
        self._final = await self.shadow.run()
        self._latest = self._final
        self._render()
        self.notify(f"Verdict: {self._final.verdict}. q quits.", timeout=30, markup=False)

    def _remember(self, report: ShadowReport) -> None:
        self._latest = report

    def _render(self) -> None:
        report = self._latest
        if report is None:
            return
        with self.batch_update():
            self.query_one(ProgressBar).update(progress=min(report.elapsed_s, self.shadow.config.duration_s))
            verdict = self.query_one("#shadow-verdict", Static)
            ratio = f"{report.p95_ratio:.2f}" if report.p95_ratio is not None else "-"
            meaning = verdict_meaning(report.verdict, report.primary.name, report.secondary.name)
            verdict.update(
                f"verdict: {report.verdict}: {meaning}  ·  p95 primary/secondary {ratio} "
                f"(threshold {self.shadow.config.threshold:g})"
                + ("" if report.finished or report.verdict == PENDING else "  ·  provisional")
            )
            verdict.set_class(report.finished and report.verdict == ADOPT, "adopt")
            verdict.set_class(report.finished and report.verdict != ADOPT, "rollback")
            self.query_one("#shadow-report", Static).update(Text(format_report(report), no_wrap=True))

    def action_stop(self) -> None:
        self.shadow.stop()

    def action_quit_view(self) -> None:
        if self._final is None:
            self.shadow.stop()  # the worker finishes the report, then q again leaves
            self.notify("Stopping: the report is written with what was measured so far.", markup=False)
            return
        self.exit(self._final)
