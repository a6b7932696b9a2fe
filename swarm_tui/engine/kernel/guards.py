"""What a run's board says of it, for every engine (the local one and the Ray driver): its outcome
(the event `run()` ends with) and the `--fail-on-error` guard. Both read the board's kept counts:
nothing here walks the tasks, so the guard costs the same after each final outcome of a
million-task run as of a ten-task one."""

from __future__ import annotations

from swarm_tui.core.board import TaskBoard
from swarm_tui.core.events import RunFinished, TaskState

FAIL_RATE_MIN_SAMPLE = 20
"""Finished tasks needed before --fail-on-error judges the rate (all of them in a smaller job)."""


def failure_rate_breach(board: TaskBoard, total: int, limit: float | None) -> str | None:
    """Why dispatch must stop under `--fail-on-error` (`limit`: the share of finished tasks that may
    fail), judged from FAIL_RATE_MIN_SAMPLE finished tasks or all of a smaller job; None: it goes on."""
    if limit is None:
        return None
    failed = board.count(TaskState.FAILED)
    finished = failed + board.count(TaskState.SUCCEEDED)
    if finished >= min(FAIL_RATE_MIN_SAMPLE, total) and finished and failed / finished > limit:
        return f"final-failure rate {failed / finished:.1%} passed --fail-on-error {limit:.1%}"
    return None


def outcome_of(
    board: TaskBoard, total: int, *, aborted: bool, stop_reason: str | None, suspended: str | None = None
) -> RunFinished:
    """Where a run of `total` tasks stands now: what succeeded, failed, and was left unfinished
    (`suspended`: why a suspension stopped it)."""
    succeeded, failed = board.count(TaskState.SUCCEEDED), board.count(TaskState.FAILED)
    return RunFinished(
        succeeded=succeeded,
        failed=failed,
        cancelled=total - succeeded - failed,
        aborted=aborted,
        stop_reason=stop_reason,
        suspended=suspended if stop_reason is not None else None,
    )
