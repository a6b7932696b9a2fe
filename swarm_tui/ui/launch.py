"""The console's entry points, as the CLI calls them: run a session in the TUI, or attach to a
run another process drives; each says where things stand once the screen is gone."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from pathlib import Path
from typing import TextIO

from swarm_tui.core.events import TaskState
from swarm_tui.frontend.headless import print_summary
from swarm_tui.run.session import SwarmSession
from swarm_tui.ui.app import make_app
from swarm_tui.util.interrupts import stop_if_interrupted
from swarm_tui.view.phase import counts_detail


def run_tui(session: SwarmSession, theme: str | None = None, *, bell: bool = False, retried: bool = False) -> int:
    """`swarm-tui run` / `resume`: run the session in the TUI; the exit code of the run.
    `retried`: opened with `--retry-failed` (the summary does not suggest it again)."""

    async def main() -> int:
        code: int | None = None
        try:
            stop_if_interrupted()  # lost while the session opened; from here on asyncio's handler hears Ctrl-C
            app = make_app(session, theme=theme, bell=bell)
            loop = asyncio.get_running_loop()
            for sig in hang_up_signals():  # the SSH session dropped (or a service manager): stop gently
                loop.add_signal_handler(sig, app.lifecycle.hang_up, sig.name)
            with contextlib.suppress(OSError):  # a terminal gone (SIGHUP) cannot be restored
                code = await app.run_async()
            await app.source.finished()  # a run that outlived its screen (SIGHUP): its calls in flight answer
            if app.lifecycle.signalled:
                code = app.lifecycle.exit_code()
            if session.summary is not None or session.engine.tasks:  # the screen is gone: say where things stand
                with contextlib.suppress(OSError):
                    print_summary(
                        session.summary or session.finalize(),
                        session.engine.outcome(),
                        session,
                        sys.stderr,
                        session_s=app.view.pace.session_elapsed_s,
                        retried=retried,
                    )
        finally:
            await session.aclose()
        return 1 if code is None else code

    return asyncio.run(main())


def hang_up_signals() -> list[signal.Signals]:
    """SIGTERM, and SIGHUP unless `nohup` made the process ignore it."""
    return [sig for sig in (signal.SIGHUP, signal.SIGTERM) if signal.getsignal(sig) is not signal.SIG_IGN]


def run_attached(run_dir: Path, theme: str | None = None, *, bell: bool = False) -> int:
    """`swarm-tui attach RUN_DIR`: the same screen for a run another process drives."""
    from swarm_tui.frontend.attached import AttachedRun

    source = AttachedRun(run_dir)

    async def main() -> int:
        app = make_app(source, theme=theme, bell=bell)
        try:
            code = await app.run_async()
            say_detached(source, sys.stderr)
        finally:
            await source.aclose()
        return 0 if code is None else code

    return asyncio.run(main())


def say_detached(source, stream: TextIO) -> None:
    """What leaving an attached view left behind, and how to come back (or go on)."""
    run_dir = source.run_dir
    if source.live:
        pid = (source.follower.heartbeat or {}).get("pid")
        print(
            f"Detached from {run_dir}: the run goes on{f' (pid {pid})' if pid else ''}.\n"
            f"Come back with: swarm-tui attach {run_dir}",
            file=stream,
        )
        return
    states = source.states
    failed = any(state is TaskState.FAILED for state in states.values())
    unfinished = any(not state.is_final for state in states.values())
    counts = counts_detail(states)
    if unfinished or failed:
        flag = " --retry-failed" if failed else ""
        print(f"Left {run_dir}: nobody runs it ({counts}).\nGo on with: swarm-tui resume {run_dir}{flag}", file=stream)
    else:
        print(f"Left {run_dir}: the run has ended ({counts}).", file=stream)
