"""The command palette (ctrl+p): every key's action by name, plus "agent N" to open an agent.

The commands are the app's actions that have a palette entry in the actions table
(`view/actions.py`). Those that make no sense right now (retry with nothing failed, pause when
nothing runs) are left out, by asking the app's `check_action`, the same rule that dims their keys.
Textual's own commands are offered too (`system_commands`), less its Quit and with a Screenshot
that knows where the run keeps its files.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from textual.app import SystemCommand
from textual.command import DiscoveryHit, Hit, Hits, Provider

from swarm_tui.view.actions import palette

if TYPE_CHECKING:
    from swarm_tui.ui.app import SwarmApp

COMMANDS: tuple[tuple[str, str, str], ...] = tuple(
    (action.action, action.palette.name, action.palette.does) for action in palette() if action.palette is not None
)
"""(action, name, what it does), from the actions table; the palette adds the action's key as bound now."""


def system_commands(
    textuals: Iterable[SystemCommand], run_dir: Path, screenshot: Callable[[], object]
) -> Iterator[SystemCommand]:
    """Textual's palette commands, less its Quit (ours asks first during a run) and with a
    Screenshot that saves into the run directory (Textual's needs ~/Downloads) and says where."""
    for command in textuals:
        if command.title == "Quit":
            continue
        if command.title == "Screenshot":
            command = SystemCommand("Screenshot", f"Save an SVG of the screen into {run_dir}", screenshot)
        yield command


class SwarmCommands(Provider):
    @property
    def _app(self) -> SwarmApp:
        return self.app  # type: ignore[return-value]

    def _available(self) -> Iterator[tuple[str, str, str]]:
        app = self._app
        for action in palette():
            if action.palette is not None and app.check_action(action.name, action.parameters):
                yield action.action, action.palette.name, f"{action.palette.does} ({app.key_hint(action.id)})"

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
            if number - 1 in self._app.source.tasks:  # agent n is the task of index n - 1
                yield Hit(
                    1.0,
                    f"Open agent {number}",
                    partial(self._app.open_agent, number - 1),
                    help="its prompt, answer and every attempt",
                )
