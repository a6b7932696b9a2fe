"""`python -m swarm_tui`, and the `swarm-tui` command (`entry`).

Ctrl-C at any moment, even while the modules load (a second or so on a busy machine, before any
handler of the CLI exists), ends with one line and exit 130, never a traceback.
"""

import signal
import sys

from swarm_tui.run.exit_codes import EXIT_ABORTED


def entry() -> int:
    try:
        from swarm_tui.cli import main

        code = main()
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C while saying so is no traceback either
        print("\nswarm-tui: interrupted", file=sys.stderr)
        code = EXIT_ABORTED
    if code == EXIT_ABORTED:
        # CPython marks a KeyboardInterrupt that passed through code run from a string (dataclasses and
        # typing `exec` such code while modules load) as unhandled, even once caught, and then ends the
        # process by SIGINT instead of with this exit code; running code from a string again clears it.
        exec("None")
    return code


if __name__ == "__main__":
    sys.exit(entry())
