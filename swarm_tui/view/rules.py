"""When each of the console's actions makes sense, why not when it does not, and the labels
that change with the run (`actions.py` names which rule each action has). No Textual.

A rule reads the run source and the screen through `Now` (the app is one) and answers True (it
makes sense: its key is bright), None (it does not: its key is dimmed, the palette leaves it
out) or False (hidden: the aggregate before there is one).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from swarm_tui.core.events import TaskState
from swarm_tui.view.agents import STATE_LABELS

if TYPE_CHECKING:
    from swarm_tui.frontend.source import RunSource

ACTIVE_STATES = frozenset({TaskState.QUEUED, TaskState.RUNNING, TaskState.RETRYING})
"""States of a task that `x` can cancel."""


class Now(Protocol):
    """What the rules read: the run and the screen as they are now (the app is one)."""

    source: RunSource

    @property
    def cursor_index(self) -> int | None:
        """The agent under the grid's cursor."""
        ...

    @property
    def aggregate_ready(self) -> bool:
        """The swarm's aggregate is written (`aggregate.md`)."""
        ...

    def key_hint(self, binding_id: str) -> str:
        """The key of one of the app's bindings, as bound now (the keymap may move it)."""
        ...


Rule = Callable[[Now], bool | None]
"""True: the action makes sense now; None: it does not (its key is dimmed); False: hidden."""
Reason = Callable[[Now], str | None]
Label = Callable[[Now], str | None]


# ----------------------------------------------------------------- what the rules read of a run


def dead_attached(source: RunSource) -> bool:
    """An attached view of a run nobody drives (its process is gone, or it ended)."""
    return source.attached and not source.running


def any_failed(source: RunSource) -> bool:
    return source.stats.failed > 0


def any_unfinished(source: RunSource) -> bool:
    stats = source.stats
    return stats.succeeded + stats.failed < len(source.tasks)


def resumable_here(source: RunSource) -> bool:
    """`p` would start the unfinished work again (here, or in the background for a run nobody drives)."""
    return not source.running and any_unfinished(source) and (not source.attached or dead_attached(source))


def cursor_state(now: Now) -> TaskState | None:
    index = now.cursor_index
    return now.source.states.get(index) if index is not None else None


# ----------------------------------------------------------------- the rules


def retry_failed(now: Now) -> bool | None:
    source = now.source
    if dead_attached(source) and any_failed(source):
        return True  # nobody runs it: offers to resume it with --retry-failed
    return True if source.can_steer and any_failed(source) else None


def retry_cursor(now: Now) -> bool | None:
    state = cursor_state(now)
    again = state is TaskState.FAILED or (state is TaskState.CANCELLED and now.source.running)
    return True if now.source.can_steer and again else None


def retry_cursor_why_not(now: Now) -> str | None:
    index, source = now.cursor_index, now.source
    if index is None:
        return None
    if not source.can_steer:
        return (
            f"Nobody is running this journal: {now.key_hint('app.retry_failed')} resumes it here with "
            "--retry-failed (in the background)."
        )
    label = STATE_LABELS[source.states.get(index, TaskState.QUEUED)]
    return (
        f"Agent {index + 1} is {label}: {now.key_hint('app.retry_agent')} retries a failed agent "
        f"({now.key_hint('app.retry_failed')} retries every failed one)."
    )


def cancel_cursor(now: Now) -> bool | None:
    source = now.source
    return True if source.can_steer and source.running and cursor_state(now) in ACTIVE_STATES else None


def toggle_pause(now: Now) -> bool | None:
    source = now.source
    if dead_attached(source):
        return True if any_unfinished(source) else None
    if not source.can_steer:
        return None
    return True if source.running or (not source.attached and any_unfinished(source)) else None


def pause_label(now: Now) -> str | None:
    source = now.source
    return "Resume" if source.paused or resumable_here(source) else None


def abort(now: Now) -> bool | None:
    return True if now.source.can_steer and now.source.running else None


def concurrency(now: Now) -> bool | None:
    return True if now.source.can_steer else None


def aggregate(now: Now) -> bool:
    return now.aggregate_ready  # hidden, not dimmed, until there is one: most runs never have one


def aggregate_why_not(now: Now) -> str:
    source = now.source
    if not source.has_aggregate_step:
        return "This job has no aggregate step: only a swarm job with an [aggregate] table writes one."
    return (
        f"No aggregate yet: {source.run_dir / 'aggregate.md'} is written by this job's "
        "aggregate step, once its last round is done."
    )


def flush_memory(now: Now) -> bool | None:
    return True if now.source.can_steer and now.source.has_memory else None


def flush_memory_why_not(now: Now) -> str:
    if not now.source.can_steer:
        return "Nothing to flush: nobody is running this journal."
    return "No rolling memory to flush: this run has one round (a swarm job with memory rounds > 1 keeps one)."


def quit_label(now: Now) -> str | None:
    return "Detach" if now.source.attached else None
