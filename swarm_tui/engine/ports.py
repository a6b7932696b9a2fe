"""The engine's ports: what the front ends drive (`Engine`), and what a lane is and may ask of the
engine that carries it (`Lane`, `LaneHost`, the autopilot's `Planner`).

They name the engine's own types (its settings, ledger, outbox, the stats it keeps), so they live
here rather than in `core.ports`, which is below the engine. Two engines implement them:
`engine.SwarmEngine` in one process, `distributed.driver.RayEngine` over Ray actors; the TUI,
`attach`, headless runs, the judge and the swarm pipeline cannot tell them apart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from swarm_tui.core.batches import BatchRow
from swarm_tui.core.board import TaskBoard
from swarm_tui.core.events import EngineEvent, RunFinished, TaskState
from swarm_tui.core.ports import Capability, RunJournal
from swarm_tui.core.task import JSONObject, Task

if TYPE_CHECKING:
    from swarm_tui.engine.kernel.numbers import AttemptNumbers
    from swarm_tui.engine.kernel.outbox import Outbox
    from swarm_tui.engine.ledger import SpendLedger
    from swarm_tui.engine.pacing.deadlines import TailDeadlines
    from swarm_tui.engine.pacing.limits import AdaptiveConcurrency
    from swarm_tui.engine.pacing.retry import RetryPolicy
    from swarm_tui.engine.settings import EngineSettings
    from swarm_tui.engine.stats import RunStats
    from swarm_tui.providers.client import CallResult, ProviderClient


class LaneHost(Protocol):
    """What a lane may ask of the engine that carries it: the run's state, read; its parts shared
    (the outbox its writes and events go through, the attempt numbering); its steps, done through
    here (the engine alone owns the queue, admission, the calls in flight and the steering)."""

    @property
    def tasks(self) -> Mapping[int, Task]: ...
    @property
    def states(self) -> Mapping[int, TaskState]: ...
    @property
    def settings(self) -> EngineSettings: ...
    @property
    def journal(self) -> RunJournal: ...
    @property
    def ledger(self) -> SpendLedger:
        """The run's one spend ledger."""

    @property
    def retry_policy(self) -> RetryPolicy: ...
    @property
    def outbox(self) -> Outbox:
        """Every write and event of the run goes through it (journal first, then the views)."""

    @property
    def numbers(self) -> AttemptNumbers:
        """Attempt numbering (it goes on across sessions) and each round's retries' budget."""

    @property
    def stopping(self) -> str | None:
        """Why the run is stopping, or None while it goes on."""

    def give_back(self, indices: Iterable[int]) -> None:
        """Tasks the lane will not carry: back to the live queue (left unfinished by a stop)."""

    def retry_soon(self, index: int, delay_s: float = 0.0) -> None:
        """A task whose attempt failed and may be tried again: ahead of the live queue after `delay_s`."""

    def ask_again(self, index: int, body: JSONObject) -> None:
        """The task's next attempt sends `body` (its answer asked for again: the conversation so far)."""

    def stop_dispatch(self, reason: str) -> None: ...
    def check_failure_rate(self) -> None: ...
    def wake(self) -> None:
        """Something the dispatcher waits for may have changed."""


class Lane(Protocol):
    """A way of carrying tasks' attempts besides the live calls the engine dispatches (the cache
    and batch lanes). A lane claims its tasks out of the live queue when a run starts, carries them
    in its own loop, and reports each outcome through its `LaneHost`. Adding one is a module and a
    line in `lanes/registry.py`: the engine is not edited."""

    @property
    def name(self) -> str: ...

    def claim(self, ready: Sequence[int]) -> list[int]:
        """Take this lane's tasks out of `ready` (the live queue, in order); return what stays live."""

    @property
    def waiting(self) -> Sequence[int]:
        """Tasks claimed and not carried yet."""

    async def run(self) -> None:
        """Carry the claimed tasks to their outcomes; return when the lane has nothing left."""

    def abort(self, *, leave_open: bool = False) -> None:
        """Stop carrying: cancel what is under way (unless `leave_open`: it runs on, a resume collects it)."""

    def wake(self) -> None:
        """The run is stopping: stop waiting."""


class Planner(Protocol):
    """A deadline run's autopilot, as the batch lane asks it (`autopilot.Autopilot`)."""

    @property
    def poll_s(self) -> float: ...

    def split(self, pending: Sequence[int]) -> tuple[list[int], list[int]]:
        """(the tasks for batches, those for the live lane), once the live share has answered."""

    def pull_back_due(self, row: BatchRow) -> bool:
        """The batch must be cancelled now and its unrun lines sent live."""

    def batch_ended(self, row: BatchRow, status: str) -> list[int]:
        """Tasks taken back from the live queue for the next batch."""


class EngineAdmission(Protocol):
    """What the front ends read of an engine's admission."""

    @property
    def limit(self) -> int: ...
    @property
    def paused(self) -> bool: ...
    @property
    def gate_remaining_s(self) -> float:
        """How long the provider's Retry-After still holds every call back."""

    @property
    def in_flight(self) -> int: ...


class Engine(Protocol):
    """What the front ends drive, whichever engine runs the swarm."""

    @property
    def capabilities(self) -> frozenset[Capability]: ...
    @property
    def tasks(self) -> Mapping[int, Task]: ...
    @property
    def client(self) -> ProviderClient:
        """The primary endpoint."""

    @property
    def stats(self) -> RunStats:
        """The run's figures, fed by its events."""

    @property
    def admission(self) -> EngineAdmission: ...
    @property
    def settings(self) -> EngineSettings: ...
    @property
    def tail(self) -> TailDeadlines | None:
        """Its tail deadlines, or None where they live elsewhere (a distributed run's shards)."""

    @property
    def ledger(self) -> SpendLedger:
        """Its spend ledger (a distributed run's holds no budget: the shards' allowances do)."""

    @property
    def adaptive(self) -> AdaptiveConcurrency | None: ...
    @property
    def fatal(self) -> str | None: ...
    @property
    def last_retry_after_asked_s(self) -> float | None: ...

    @property
    def states(self) -> Mapping[int, TaskState]: ...
    @property
    def board(self) -> TaskBoard:
        """Each task's state and how many are in each (kept, not counted), and what is in flight."""

    @property
    def running(self) -> bool: ...
    @property
    def paused(self) -> bool: ...

    def subscribe(self, listener: Callable[[EngineEvent], None]) -> None: ...
    async def run(self) -> RunFinished:
        """Dispatch until every task is final or a stop ends it; a stop asked before it began holds."""

    def go_on(self) -> None:
        """Forget the stop that ended the last run: the user asked to go on (a retry, `p`)."""

    def outcome(self) -> RunFinished: ...
    def pause(self, *, now: bool = False) -> list[int]:
        """Send nothing new; `now` (`Capability.HOLD_CALLS`): hold the calls in flight too, their
        tasks first in line at `resume`. Returns the tasks whose calls were held."""

    def resume(self) -> None: ...
    def set_concurrency(self, limit: int, reason: str = "user") -> int: ...
    def abort(self, reason: str = "aborted by user", *, leave_batches: bool = False) -> None: ...
    def stop_dispatch(self, reason: str) -> None: ...
    def retry_failed(self, indices: Iterable[int] | None = None) -> list[int]: ...
    def cancel_tasks(self, indices: Iterable[int]) -> list[int]:
        """Stop these tasks now (`Capability.CANCEL`; an engine without it cancels nothing)."""

    def add_tasks(self, tasks: Sequence[Task]) -> list[int]: ...
    def announce_phase(self, phase: str, detail: str = "") -> None: ...
    async def call_direct(self, phase: str, index: int, body: JSONObject) -> CallResult:
        """One call outside the task grid (a swarm's planner, warm-up, aggregator)."""

    async def aclose(self) -> None:
        """Let go of what the engine holds outside the process (a distributed engine's actors)."""
