"""Ctrl-C while a command starts, kept until the command takes Ctrl-C over.

The modules load in the first second or so of every command (more on a busy machine), under
Python's own handler, which raises KeyboardInterrupt wherever the interpreter happens to be. Twice
it can be lost on the way: a library turns it into an error of its own and handles that (pydantic
building a schema while `import openai` runs raises `SchemaError`), or it is raised inside a
finalizer (a weak reference's callback while the garbage collector runs), where the interpreter
prints "Exception ignored in ..." and goes on. A run started after either went on to the end
and exited 0, as though no key had been pressed.

So the process notes each Ctrl-C beside whatever handler runs: the interpreter writes each signal
it receives to a wakeup fd before any Python handler runs (`Interrupts.note`), and
`stop_if_interrupted` raises the KeyboardInterrupt again where a command takes over (the run's
own Ctrl-C handling, in its event loop, from where asyncio's handler cancels it: a cancellation
is never lost in a finalizer). A KeyboardInterrupt lost in a finalizer is not printed either: the
command says "interrupted" once, in one line.
"""

from __future__ import annotations

import os
import signal
import sys


class Interrupts:
    """Every Ctrl-C the process received since `note()`, whatever a handler or a library made of it.
    asyncio takes the wakeup fd over when a run installs its own handlers (`loop.add_signal_handler`):
    from then on the run answers Ctrl-C itself, and what came before stays noted here."""

    def __init__(self) -> None:
        self._read_fd: int | None = None
        self._seen = False

    def note(self) -> None:
        """From now on (once a process: a second call keeps the first's notes)."""
        if self._read_fd is not None:
            return
        read_fd, write_fd = os.pipe()
        os.set_blocking(read_fd, False)
        os.set_blocking(write_fd, False)
        try:
            signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        except ValueError:  # not the main thread: no Ctrl-C is delivered here anyway
            os.close(read_fd)
            os.close(write_fd)
            return
        self._read_fd = read_fd
        fallback = sys.unraisablehook

        def unraisable(info: sys.UnraisableHookArgs) -> None:  # a Ctrl-C lost in a finalizer: noted, said once
            if info.exc_type is not KeyboardInterrupt:
                fallback(info)

        sys.unraisablehook = unraisable

    def seen(self) -> bool:
        """A Ctrl-C arrived (once true, true for good)."""
        if not self._seen and self._read_fd is not None:
            try:
                while chunk := os.read(self._read_fd, 512):
                    self._seen = self._seen or signal.SIGINT in chunk
            except BlockingIOError:  # nothing more to read
                pass
        return self._seen


STARTUP = Interrupts()
"""The process's: `swarm_tui.__main__.entry` starts noting as the process starts."""


def stop_if_interrupted() -> None:
    """The user's Ctrl-C, if one came while the command started and was lost on the way: raised
    again as KeyboardInterrupt (the command ends as every Ctrl-C at start does: one line, 130)."""
    if STARTUP.seen():
        raise KeyboardInterrupt
