"""The kernel's parts: each owns one fact of a running swarm, whole in its module.

* `queue.TaskQueue` — where every task is: waiting its turn, held by the user, waiting out a
  backoff, in flight, or running its tools; the handles of the calls and tool runs under way.
* `outbox.Outbox` — the group commit: every event on disk (with the write it reports) before the
  board moves and the listeners hear of it.
* `numbers.AttemptNumbers` — each task's attempt numbers (across sessions) and its retries' budget.
* `guards` — what the board says of the run: its outcome, and the `--fail-on-error` guard.

`engine.SwarmEngine` holds them with its lanes and pacing (`engine.builder` assembles it); the Ray
driver (`distributed.driver.RayEngine`) holds the same outbox and numbering, by composition.
"""
