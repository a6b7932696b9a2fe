"""The command palette (ctrl+p): every key's action by name, plus "agent N" to open an agent.

Commands that make no sense right now (retry with nothing failed, pause when nothing runs)
are left out, by asking the app's `check_action`, the same rule that dims their keys.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Provider

from .keys import own_bindings

if TYPE_CHECKING:
    from .app import SwarmApp

COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("retry_failed", "Retry failed agents", "queue every failed agent again"),
    ("retry_cursor", "Retry the agent under the cursor", "queue the failed agent under the grid cursor"),
    ("toggle_pause", "Pause / resume the run", "pause dispatch (in-flight calls finish), or resume"),
    ("abort", "Abort the run", "cancel in-flight calls; the journal stays resumable"),
    ("concurrency(1)", "Raise the concurrency ceiling", "the adaptive limit works under it"),
    ("concurrency(-1)", "Lower the concurrency ceiling", "the adaptive limit works under it"),
    ("cycle_theme", "Next theme", "swarm-dark, swarm-light, swarm-high-contrast..."),
    ("toggle_heat", "Toggle the latency heat view", "colour agents by latency instead of state"),
    ("provider", "Provider pane", "profiles: edit, save, test connection"),
    ("estimate", "Cost projection", "this run's tokens per task priced per month on every model"),
    ("aggregate", "Aggregate", "what the swarm's aggregator wrote"),
    ("flush_memory", "Flush the rolling memory", "later rounds start from the shared context only"),
    ("help", "Help", "keys, panes, monitoring over SSH"),
    ("quit", "Quit", "leave; a run in flight is aborted, the journal stays resumable"),
)
"""(action, name, what it does); the help adds the action's key as bound now."""


class SwarmCommands(Provider):
    @property
    def _app(self) -> SwarmApp:
        return self.app  # type: ignore[return-value]

    def _available(self):
        app = self._app
        binding_of = {binding.action: binding.id for binding in own_bindings(type(app)) if binding.id}
        for action, name, does in COMMANDS:
            base, _, args = action.partition("(")
            parameters = (int(args.rstrip(")")),) if args else ()
            if app.check_action(base, parameters):
                binding_id = binding_of.get(action)
                yield action, name, f"{does} ({app.key_hint(binding_id)})" if binding_id else does

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
