"""The garbage collector, paced for a running swarm.

CPython's cyclic collector runs a young-generation pass every 700 net allocations by default. An
engine at its zero-latency ceiling allocates a few hundred objects a call (the request, the
answer's JSON, events, futures), so it collected every few calls, and those passes took about a
tenth of its CPU: `python benchmarks/bench_trees.py` measured 360 us of CPU a task with the
default and 326 us with the young generation collected every 7,000 allocations (the figures are
in the docs' benchmarks page). The objects a run creates mostly die young, by reference count,
without the collector; what it finds is the rare cycle (an exception and its traceback), which a
pass ten times rarer still finds, a little later.

`collecting_less_often()` raises the young generation's threshold while a run runs and puts the
process's own back when the last run in it ends (runs of one process nest, the API's included);
a threshold already higher, or the collector switched off, is left as it is.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["RUN_GEN0_THRESHOLD", "collecting_less_often"]

RUN_GEN0_THRESHOLD = 7000
"""Net allocations between young-generation passes while a run runs (CPython's default: 700)."""

_runs = 0
_before: tuple[int, int, int] | None = None


@contextmanager
def collecting_less_often() -> Iterator[None]:
    """While this runs, the young generation is collected every `RUN_GEN0_THRESHOLD` allocations."""
    global _runs, _before
    if _runs == 0:
        threshold = gc.get_threshold()
        if threshold[0] != 0 and threshold[0] < RUN_GEN0_THRESHOLD:
            _before = threshold
            gc.set_threshold(RUN_GEN0_THRESHOLD, threshold[1], threshold[2])
    _runs += 1
    try:
        yield
    finally:
        _runs -= 1
        if _runs == 0 and _before is not None:
            gc.set_threshold(*_before)
            _before = None
