"""The command palette (ctrl+p): every key's action by name, plus "agent N" to open an agent.

Commands that make no sense right now (retry with nothing failed, pause when nothing runs)
are left out, by asking the app's `check_action`, the same rule that dims their keys.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Provider

if TYPE_CHECKING:
    from .app import SwarmApp

COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("retry_failed", "Retry failed agents", "queue every failed agent again (r)"),
    ("retry_cursor", "Retry the agent under the cursor", "queue the failed agent under the grid cursor (R)"),
    ("toggle_pause", "Pause / resume the run", "pause dispatch (in-flight calls finish), or resume (p)"),
    ("abort", "Abort the run", "cancel in-flight calls; the journal stays resumable (a)"),
    ("concurrency(1)", "Raise the concurrency ceiling", "the adaptive limit works under it (+)"),
    ("concurrency(-1)", "Lower the concurrency ceiling", "the adaptive limit works under it (-)"),
    ("cycle_theme", "Next theme", "swarm-dark, swarm-light, swarm-high-contrast... (t)"),
    ("toggle_heat", "Toggle the latency heat view", "colour agents by latency instead of state (h)"),
    ("provider", "Provider pane", "profiles: edit, save, test connection (e)"),
    ("estimate", "Cost projection", "this run's tokens per task priced per month on every model ($)"),
    ("aggregate", "Aggregate", "what the swarm's aggregator wrote (g)"),
    ("flush_memory", "Flush the rolling memory", "later rounds start from the shared context only (m)"),
    ("help", "Help", "keys, panes, monitoring over SSH (?)"),
    ("quit", "Quit", "leave; a run in flight is aborted, the journal stays resumable (q)"),
)


class SwarmCommands(Provider):
    @property
    def _app(self) -> SwarmApp:
        return self.app  # type: ignore[return-value]

    def _available(self):
        app = self._app
        for action, name, help_text in COMMANDS:
            base, _, args = action.partition("(")
            parameters = (int(args.rstrip(")")),) if args else ()
            if app.check_action(base, parameters):
                yield action, name, help_text

    async def discover(self) -> Hits:
        for action, name, help_text in self._available():
            yield DiscoveryHit(name, partial(self._app.run_action, action), help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for action, name, help_text in self._available():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), partial(self._app.run_action, action), help=help_text)
        words = query.lower().replace("#", " ").split()
        if len(words) >= 1 and words[-1].isdigit() and (len(words) == 1 or "agent".startswith(words[0])):
            number = int(words[-1])
            if any(task.agent == number for task in self._app.source.tasks):
                yield Hit(
                    1.0,
                    f"Open agent {number}",
                    partial(self._app.open_agent, number - 1),
                    help="its prompt, answer and every attempt",
                )
