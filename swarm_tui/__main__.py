"""`python -m swarm_tui`, and the `swarm-tui` command (`entry`).

Ctrl-C at any moment, even while the modules load (a second or so on a busy machine, before any
handler of the CLI exists), ends with one line and exit 130, never a traceback: also when the
interrupt lands inside a library that turns it into an error of its own (pydantic building a
schema while `import openai` runs raises `SchemaError`), or inside a finalizer, where the
interpreter drops it. The modules load in `main` too (a command line loads its command's modules:
the engine and the SDK for `run`), under Python's own handler, which asyncio's `run` takes over
from only if it is Python's own; so the interrupt is noted beside the handler, not by one
(`util.interrupts`): an error that escapes after a Ctrl-C is that Ctrl-C, and a Ctrl-C nothing
acted on stops the command where it takes Ctrl-C over (`main`, and a run's event loop).

Output into a pipe whose reader has gone (`swarm-tui estimate | head -1`) ends quietly with the
shell's code for a process SIGPIPE stopped (141), as `git log | head` does; nothing is written
to a closed pipe again.

A damaged SQLite file met on the way (a run's journal with pages of garbage, read by `resume`,
`export`, `export-traces`, `replay`...) is said in one line naming it, exit 2: SQLite finds the
damage only when it reads the page, wherever a command happens to be then.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import sys
from pathlib import Path

from swarm_tui.run.exit_codes import EXIT_ABORTED, EXIT_BAD_INPUT
from swarm_tui.util.interrupts import STARTUP, stop_if_interrupted

EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE
"""Output into a pipe whose reader has gone: the shell's code for a process SIGPIPE stopped."""


def entry() -> int:
    try:
        try:
            STARTUP.note()
            from swarm_tui.cli import main

            stop_if_interrupted()  # caught and swallowed on the way: the user still asked to stop
            try:
                code = main()
            finally:  # `--help` ends by SystemExit: its output too is flushed here
                sys.stdout.flush()  # a closed pipe is found here, not at the interpreter's exit
        except BaseException as exc:
            if not isinstance(exc, KeyboardInterrupt) and STARTUP.seen():
                raise KeyboardInterrupt from None  # whatever a library made of the interrupt, it was the user's Ctrl-C
            raise
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C while saying so is no traceback either
        print("\nswarm-tui: interrupted", file=sys.stderr)
        code = EXIT_ABORTED
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except sqlite3.DatabaseError as exc:
        if not _is_damage(exc):  # locked, read-only...: the commands say those themselves
            raise
        print(f"swarm-tui: {_damaged(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if code == EXIT_ABORTED:
        # CPython marks a KeyboardInterrupt that passed through code run from a string (dataclasses and
        # typing `exec` such code while modules load) as unhandled, even once caught, and then ends the
        # process by SIGINT instead of with this exit code; running code from a string again clears it.
        exec("None")
    return code


def _is_damage(exc: sqlite3.DatabaseError) -> bool:
    """A damaged file, as SQLite finds it: a malformed page, or garbage where a text column's UTF-8
    should be (which sqlite3 reports as an OperationalError when it decodes the value)."""
    if type(exc) is sqlite3.DatabaseError:
        return True
    return type(exc) is sqlite3.OperationalError and str(exc).startswith("Could not decode to UTF-8")


def _damaged(exc: sqlite3.DatabaseError) -> str:
    """A damaged database in words: the journal of the run directory the command was given, when
    it was given one, else whichever SQLite file it read (a journal, the response cache)."""
    # a decode error's message quotes the undecodable bytes: not for a terminal
    reason = "text that is not UTF-8 where text is kept" if type(exc) is sqlite3.OperationalError else str(exc)
    for arg in sys.argv[1:]:
        journal = Path(arg) / "journal.sqlite"
        if not arg.startswith("-") and journal.is_file():
            return (
                f"{journal}: journal: cannot be read ({reason}): the file is damaged; its run cannot be "
                "resumed or exported from it (a copy made before the damage can)"
            )
    return (
        f"a database this command read is damaged ({reason}): a run's journal.sqlite, or the response "
        "cache (`swarm-tui cache clear`, or remove its file)"
    )


def _silence_stdout() -> None:
    """stdout pointed at /dev/null: what is still buffered (and the interpreter's flush at exit)
    goes nowhere instead of failing again on the closed pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


if __name__ == "__main__":
    sys.exit(entry())
