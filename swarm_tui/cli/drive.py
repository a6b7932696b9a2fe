"""How `run` and `resume` show the session they opened: the console when a terminal is there (and
Textual with it), else headless with a log on stderr; and the console's own preflight (its theme)."""

from __future__ import annotations

import asyncio
import os
import sys
from typing import TYPE_CHECKING

from swarm_tui.util.interrupts import stop_if_interrupted

if TYPE_CHECKING:  # a command that only asks `tui_available` imports nothing of the run
    from swarm_tui.run.preflight import Check
    from swarm_tui.run.request import ConsoleRequest
    from swarm_tui.run.resolve import Tracing
    from swarm_tui.run.session import SwarmSession


def tui_available() -> bool:
    try:
        import swarm_tui.ui.app  # noqa: F401
    except ImportError:
        return False
    return sys.stdout.isatty() or bool(os.environ.get("SWARM_TUI_FORCE_TUI"))


def console_checks(console: ConsoleRequest) -> list[Check]:
    """What the front end checks with the run's preflight: a --theme that cannot load (exit 2)."""
    if not console.theme or console.headless or not tui_available():
        return []
    theme = console.theme

    def check_theme() -> None:
        from swarm_tui.ui.themes import check_theme

        check_theme(theme)

    return [check_theme]


def drive(session: SwarmSession, console: ConsoleRequest, tracing: Tracing | None, *, retried: bool = False) -> int:
    """Run the session to its end in the console or headless; its exit code. `retried`: it was
    opened with `--retry-failed` (the summary does not suggest it again)."""
    if tracing is not None:
        try:
            session.trace(content=tracing.content, endpoint=tracing.endpoint)
        except BaseException:
            asyncio.run(session.aclose())  # the run directory's lock and the simulator, released
            raise
    if console.headless or not tui_available():
        return asyncio.run(_headless(session, console, retried))
    from swarm_tui.ui.launch import run_tui

    return run_tui(session, theme=console.theme, bell=console.bell, retried=retried)


async def _headless(session: SwarmSession, console: ConsoleRequest, retried: bool) -> int:
    from swarm_tui.frontend.headless import run_headless
    from swarm_tui.frontend.progress_lines import DEFAULT_EVERY_S

    try:
        stop_if_interrupted()  # lost while the session opened; from here on asyncio's handler hears Ctrl-C
        return await run_headless(
            session,
            log_format=console.log_format,
            every_s=console.log_every_s or DEFAULT_EVERY_S,
            retried=retried,
            bell=console.bell,
        )
    finally:
        await session.aclose()
