"""The run's clock: wall time that a step of the system clock does not move.

`time.time()` jumps when the system clock is stepped (NTP correcting a drift, a VM restored, a
user setting the date): a duration taken as the difference of two wall times across a step is
wrong by the step (an hour's step made a 23 s run's makespan 7,200 s, its cost a minute 300x too
low, a deadline met in 10 s missed). `run_time()` is the wall time when the process first read
this clock plus the monotonic time since: the wall clock until a step, after which it goes on
from where it was instead of jumping. What the journal keeps as the time of a call (an attempt's
start, a batch's submission) and what a deadline is checked against come from it, so every
duration within a session is a monotonic one, and the time shown stays a wall time (the session's
wall start and its monotonic offset). Between sessions (a resume, another process) the anchors are
wall times: the only clock two processes share across a reboot.
"""

from __future__ import annotations

import time

_WALL_AT_START = time.time()
_MONOTONIC_AT_START = time.monotonic()


def run_time() -> float:
    """Epoch seconds on the process's steady axis: its wall start plus the monotonic time since."""
    return _WALL_AT_START + (time.monotonic() - _MONOTONIC_AT_START)
