"""The process's exit codes, and how a run that ended maps to one: the contract scripts read.

0 every task succeeded (and the outputs were written); 1 the run ended with failed or unfinished
tasks, or its outputs could not be written; 2 bad input or configuration, nothing sent; 130
aborted by the user, the journal intact and resumable. The command line, the headless front end
and the console all end through here, so a run says the same whichever way it was watched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from swarm_tui.core.events import RunFinished

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_ABORTED = 130


def exit_code(finished: RunFinished, output_error: str | None = None) -> int:
    """The run's exit code, headless and in the TUI alike: 0 every task succeeded and the outputs
    were written; 130 the user aborted with work left (the journal is resumable); 1 otherwise: failed
    or unfinished tasks, a stop (budget, error rate, the journal), or results.jsonl / summary.json
    that could not be written (`output_error`: a run whose outputs are missing never says 0)."""
    complete = not (finished.failed or finished.cancelled or finished.stop_reason)
    if complete and output_error is None:
        return EXIT_OK
    if finished.aborted and not complete:
        return EXIT_ABORTED
    return EXIT_FAILED


def signalled_exit_code(code: int, signalled: str | None, output_error: str | None) -> int:
    """A run stopped by a signal (SIGTERM, SIGHUP) with work left is the user's stop: 130, resumable;
    unless its outputs are missing (1 says so)."""
    return EXIT_ABORTED if signalled and code == EXIT_FAILED and output_error is None else code
