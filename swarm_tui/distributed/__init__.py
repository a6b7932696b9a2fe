"""Scale-out on Ray: one swarm over many machines, one rate budget, one journal.

* `budget` / `limiter` — the provider's RPM/TPM budget and Retry-After gate, held once for the
  whole swarm (a Ray actor); engines lease a few requests at a time.
* `admission` — the shard engines' admission, leasing from the limiter.
* `sink` — the journal a shard's engine writes to: an outbox streamed back to the driver.
* `worker` — an async Ray actor running the project's own `SwarmEngine` on its shard.
* `driver_calls` — the calls made from the driver: planner, warm-up, aggregator, judge.
* `driver` — `RayEngine`: shards the tasks, commits every outcome to the real journal before
  its listeners hear of it, re-queues a lost actor's unfinished tasks; the TUI and headless
  runs drive it as they drive `SwarmEngine`.

Ray is optional (`pip install 'swarm-tui[ray]'`); nothing here is imported unless `--ray` is given.
"""

from __future__ import annotations

from swarm_tui.core.errors import InputError
from swarm_tui.core.ports import Capability

CAPABILITIES: frozenset[Capability] = frozenset(
    {
        Capability.JUDGE,
        Capability.FAIL_OVER,
        Capability.TOOLS,
        Capability.BATCH,
        Capability.LEAVE_BATCHES,
        Capability.CANCEL,
    }
)
"""What `RayEngine` can do beyond one call per task (a swarm's planner and aggregator included):
the judge (its calls made from the driver, `driver_calls`), its failover (told to every
shard), multi-step agents with tools (the tools run on the actors, their transcripts are
journaled through the driver), the batch lane (on the driver, which owns the batches), and
cancelling one agent (by the shard that holds it).
The CLI refuses a run that needs more, naming what (exit 2)."""

INSTALL_HINT = "Ray is not installed: pip install 'swarm-tui[ray]'  (or: pip install ray)"


def ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def require_ray() -> None:
    """Raise InputError (exit 2, nothing sent) when Ray is missing, saying how to install it."""
    if not ray_available():
        raise InputError.single("--ray", "ray", INSTALL_HINT)
