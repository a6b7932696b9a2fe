"""`python -m swarm_tui`, and the `swarm-tui` command (`entry`).

Ctrl-C at any moment, even while the modules load (a second or so on a busy machine, before any
handler of the CLI exists), ends with one line and exit 130, never a traceback: also when the
interrupt lands inside a library that turns it into an error of its own (pydantic building a
schema while `import openai` runs raises `SchemaError`), since the handler here notes it first.

Output into a pipe whose reader has gone (`swarm-tui estimate | head -1`) ends quietly with the
shell's code for a process SIGPIPE stopped (141), as `git log | head` does; nothing is written
to a closed pipe again.
"""

import os
import signal
import sys

from swarm_tui.run.exit_codes import EXIT_ABORTED

EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE
"""Output into a pipe whose reader has gone: the shell's code for a process SIGPIPE stopped."""

_interrupted = False
"""A Ctrl-C arrived while the CLI's modules loaded."""


def _on_interrupt(signum: int, frame: object) -> None:
    global _interrupted
    _interrupted = True
    raise KeyboardInterrupt


def entry() -> int:
    signal.signal(signal.SIGINT, _on_interrupt)  # Python's own until the CLI is loaded, noting it
    try:
        try:
            from swarm_tui.cli import main
        except BaseException:
            if _interrupted:  # whatever a library made of the interrupt, it was the user's Ctrl-C
                raise KeyboardInterrupt from None
            raise
        if _interrupted:  # caught and swallowed on the way: the user still asked to stop
            raise KeyboardInterrupt
        signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            code = main()
        finally:  # `--help` ends by SystemExit: its output too is flushed here
            sys.stdout.flush()  # a closed pipe is found here, not at the interpreter's exit
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C while saying so is no traceback either
        print("\nswarm-tui: interrupted", file=sys.stderr)
        code = EXIT_ABORTED
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    if code == EXIT_ABORTED:
        # CPython marks a KeyboardInterrupt that passed through code run from a string (dataclasses and
        # typing `exec` such code while modules load) as unhandled, even once caught, and then ends the
        # process by SIGINT instead of with this exit code; running code from a string again clears it.
        exec("None")
    return code


def _silence_stdout() -> None:
    """stdout pointed at /dev/null: what is still buffered (and the interpreter's flush at exit)
    goes nowhere instead of failing again on the closed pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


if __name__ == "__main__":
    sys.exit(entry())
