"""A recorded run, replayed: the snapshot tests' run source, with no engine, no HTTP, no journal.

`ScriptedRun` is a run source (`view.source.RunSource`) whose `RunView` is fed a recorded list of
(time, event) pairs, as a resumed run's screen is fed its earlier sessions: the screen shows what
they did, frozen in time. What the console asks of a journal (an agent's attempts, its result)
is read from the same events. Steering calls are recorded, never sent anywhere.

The recording (`fixtures/snapshot_run.jsonl`: the event log's own encoding, one event a line) is
made once from a real run on the seeded simulator, its timings set to fixed values (`record`):

    python -m tests.scripted_run          # from the repository's root: rewrites the recording

Re-record only on purpose (a change to what the engine emits), then look at the snapshots.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from swarm_tui.core import codec
from swarm_tui.core.call_errors import error_body
from swarm_tui.core.events import (
    AgentStepped,
    Attempt,
    AttemptEnded,
    AttemptStarted,
    EngineEvent,
    PhaseAttempt,
    RunFinished,
    TaskCancelled,
    TaskFailed,
    TaskRetrying,
    TaskSucceeded,
)
from swarm_tui.core.task import Task
from swarm_tui.engine import EngineSettings
from swarm_tui.jobs import Job
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.view.run_view import RunView

RECORDING = Path(__file__).parent / "fixtures" / "snapshot_run.jsonl"
FROZEN = 1_700_000_000.0
"""The recording's epoch: 2023-11-14 22:13:20 UTC."""
FAILING = {12: "[[sim:500]]", 41: "[[sim:503]]", 76: "[[sim:quota]]"}
"""Agents 13, 42 and 77 fail for good (5xx twice; quota at once); 6 and 61 are retried once."""
FLAKY = {5: "[[sim:429x1]]", 60: "[[sim:500x1]]"}
CONTEXT = (
    "You are one worker of a swarm of sub-agents exploring a problem in parallel. Answer your own task "
    "only, in at most three sentences, and end with one line `RESULT: <one short finding>`."
)


def snapshot_job() -> Job:
    """The demo's shape (shared context first, 100 agents), fixed here so that edits to the
    sample job do not move the snapshots; markers script the failures."""
    tasks = []
    for index in range(100):
        marker = FAILING.get(index) or FLAKY.get(index) or ""
        body = {
            "model": "kimi-k2.5",
            "max_tokens": 512,
            "temperature": 0.6,
            "messages": [
                {"role": "system", "content": CONTEXT},
                {"role": "system", "content": f"You are sub-agent #{index + 1} of swarm/100."},
                {"role": "user", "content": f"Run task #{index + 1} {marker}".strip()},
            ],
        }
        tasks.append(Task(index, f"agent-{index + 1:03d}", body))
    return Job("swarm-100", "snapshot fixture", tasks, model="kimi-k2.5")


# ----------------------------------------------------------------- the recording


def load_recording(path: Path = RECORDING) -> list[tuple[float, EngineEvent]]:
    """(when it was logged, event), in order."""
    timed = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            timed.append((row["at"], codec.decode(row["kind"], json.dumps(row["data"]))))
    return timed


def save_recording(timed: Iterable[tuple[float, EngineEvent]], path: Path = RECORDING) -> None:
    lines = []
    for at, event in timed:
        kind, data = codec.encode(event)
        lines.append(json.dumps({"at": at, "kind": kind, "data": json.loads(data)}, ensure_ascii=False))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def fixed_times(event: EngineEvent) -> EngineEvent:
    """An event with fixed timings: each attempt starts at a time of its agent and number and
    takes a latency of its agent, so nothing depends on the machine that recorded it."""
    attempt = getattr(event, "attempt", None)
    if attempt is None:
        return event
    retry_in_s = 0.5 + attempt.number if attempt.outcome == "retry" else None
    attempt = replace(
        attempt,
        started_at=FROZEN + attempt.index * 0.05 + attempt.number * 2.0,
        latency_ms=180 + (attempt.index * 37) % 900,
        ttft_ms=None,
        retry_in_s=retry_in_s,
    )
    if isinstance(event, TaskRetrying):
        return replace(event, attempt=attempt, delay_s=retry_in_s)
    return replace(event, attempt=attempt)  # type: ignore[type-var]


def in_fixed_order(events: Sequence[EngineEvent]) -> list[tuple[float, EngineEvent]]:
    """(time, event) in the order of the fixed timings, so the log reads the same on every run
    (retries come back after a random backoff): run-level events keep their place around them."""
    timed, at = [], FROZEN
    for position, event in enumerate(events):
        attempt = getattr(event, "attempt", None)
        if isinstance(event, AttemptStarted):
            at = FROZEN + event.index * 0.05 + event.number * 2.0
        elif attempt is not None:
            at = attempt.started_at + attempt.latency_ms / 1000
        elif isinstance(event, RunFinished):
            at = float("inf")
        timed.append((at, position, event))
    timed.sort(key=lambda item: (item[0], item[1]))
    end = max(at for at, _, _ in timed if at != float("inf"))
    return [(end if at == float("inf") else at, event) for at, _, event in timed]


def record(path: Path = RECORDING) -> int:
    """Run the snapshot job to its end on the seeded simulator, one call at a time (the log's
    order and every figure the same on every run), and write its events with fixed timings."""
    import tempfile

    from swarm_tui.journal import Journal
    from swarm_tui.run.session import RunPlan, SwarmSession
    from swarm_tui.sim import SimConfig

    sim = SimConfig(latency_ms=1.0, latency_sigma=0.0, seed=7, cache_min_tokens=10**9)
    plan = RunPlan(ProviderProfile(name="sim"), EngineSettings.of(concurrency=1, max_attempts=2, rpm=60_000), sim)
    with tempfile.TemporaryDirectory() as root:
        run_dir = Path(root) / "swarm-100-demo"
        session = SwarmSession.open_new(snapshot_job(), plan, run_dir)

        async def run() -> None:
            try:
                await session.run()
            finally:
                await session.aclose()

        asyncio.run(run())
        journal = Journal.open(run_dir, readonly=True)
        events = [fixed_times(event) for _, _, event in journal.history.log_since(0)]
        journal.close()
    save_recording(in_fixed_order(events), path)
    return len(events)


# ----------------------------------------------------------------- the source


def attempt_row(attempt: Attempt) -> dict[str, Any]:
    """An attempt as the journal's `attempts` table holds it (what an agent's detail reads)."""
    error, usage = attempt.error, attempt.usage
    return {
        "idx": attempt.index,
        "number": attempt.number,
        "endpoint": attempt.endpoint,
        "started_at": attempt.started_at,
        "latency_ms": attempt.latency_ms,
        "ttft_ms": attempt.ttft_ms,
        "outcome": attempt.outcome,
        "retry_in_s": attempt.retry_in_s,
        "status": attempt.status,
        "error_class": str(error.kind) if error else None,
        "error_code": error.code if error else None,
        "error_message": error.message if error else None,
        "request_id": attempt.request_id,
        "prompt_tokens": usage.prompt,
        "completion_tokens": usage.completion,
        "cached_tokens": usage.cached,
        "reasoning_tokens": usage.reasoning,
        "cost_usd": attempt.cost_usd,
        "estimated": int(attempt.estimated),
        "finish_reason": attempt.finish_reason,
    }


ATTEMPT_EVENTS = (TaskSucceeded, TaskRetrying, TaskFailed, AttemptEnded, AgentStepped, PhaseAttempt, TaskCancelled)


class ScriptedRun:
    """A recorded run as the console's run source (see the module's notes)."""

    attached = False
    in_flight_known = True
    can_steer = True
    resumable = False
    fatal = None
    output_error = None
    has_memory = False
    has_aggregate_step = False
    has_tools = False
    running = False

    def __init__(
        self,
        recording: Sequence[tuple[float, EngineEvent]],
        job: Job,
        run_dir: Path,
        *,
        profile: ProviderProfile,
        settings: EngineSettings,
        limit: int | None = None,
        ceiling: int | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        """`limit`, `ceiling`: the session's own, before it runs (a recording's are its own)."""
        self.run_dir = run_dir
        self.job_name = job.name
        self.profile = profile
        self.settings = settings
        self.model = job.model
        self.simulated = profile.is_simulator
        self.base_url = "embedded simulator" if self.simulated else profile.base_url
        self._tasks = {task.index: task for task in job.tasks}  # by index, as a live session's table
        self.view = RunView(list(self._tasks), **({"clock": clock} if clock else {}))
        self.view.replay(recording)
        self.view.figures.limit, self.view.figures.ceiling = limit, ceiling
        if not self.view.stats.total:
            self.view.stats.total = len(self._tasks)
        self._attempts: dict[int, list[dict[str, Any]]] = {}
        self._results: dict[int, dict[str, Any]] = {}
        for _, event in recording:
            self._journal(event)
        self.asked: list[tuple[str, tuple[Any, ...]]] = []
        """The steering calls made (a recorded run is not steered: they are only noted)."""

    def _journal(self, event: EngineEvent) -> None:
        attempt = getattr(event, "attempt", None)
        if isinstance(event, ATTEMPT_EVENTS) and attempt is not None:
            self._attempts.setdefault(attempt.index, []).append(attempt_row(attempt))
        if isinstance(event, TaskSucceeded):
            message = {"role": "assistant", "content": event.content}
            response = {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
            self._results[event.index] = {"ok": True, "request_id": event.attempt.request_id, "response": response}
        elif isinstance(event, TaskFailed) and not self._results.get(event.index, {}).get("ok"):
            error = error_body(event.attempt.error) if event.attempt.error else None
            self._results[event.index] = {"ok": False, "request_id": event.attempt.request_id, "error": error}

    # ----------------------------------------------------------------- what the console reads

    @property
    def stats(self):
        return self.view.stats

    @property
    def states(self):
        return self.view.states

    @property
    def tasks(self) -> dict[int, Task]:
        return self._tasks

    def task_of(self, index: int) -> Task | None:
        return self._tasks.get(index)

    @property
    def paused(self) -> bool:
        return self.view.figures.paused

    @property
    def limit(self) -> int:
        return self.view.figures.limit or self.settings.pacing.concurrency

    @property
    def ceiling(self) -> int:
        return self.view.figures.ceiling or self.limit

    straggler_s = None

    def attempts_of(self, index: int) -> list[dict[str, Any]]:
        return list(self._attempts.get(index, []))

    def result_of(self, index: int) -> dict[str, Any] | None:
        return self._results.get(index)

    def eta_s(self) -> float | None:
        return None

    def liveness(self, short: bool = False) -> str:
        return "a recording"

    def exit_code(self) -> int:
        return 1 if self.view.stats.failed else 0

    # ----------------------------------------------------------------- steering: noted only

    def subscribe(self, listener) -> None:
        self.asked.append(("subscribe", ()))

    async def run(self) -> None:
        self.asked.append(("run", ()))

    def _ask(self, what: str, *args: Any) -> None:
        self.asked.append((what, args))

    def pause(self) -> None:
        self._ask("pause")

    def resume(self) -> None:
        self._ask("resume")

    def abort(self, reason: str = "aborted by user", *, leave_batches: bool = False) -> None:
        self._ask("abort", reason)

    def stop_dispatch(self, reason: str) -> None:
        self._ask("stop", reason)

    def outlive_app(self) -> None:
        self._ask("outlive_app")

    async def finished(self) -> None:
        return None

    def set_concurrency(self, limit: int, reason: str = "user") -> int:
        self._ask("concurrency", limit)
        self.view.figures.ceiling = max(1, limit)
        return max(1, limit)

    def retry(self, indices: Iterable[int] | None = None) -> list[int]:
        self._ask("retry", indices)
        return []

    def cancel(self, indices: Iterable[int]) -> list[int]:
        self._ask("cancel", list(indices))
        return []

    def flush_memory(self) -> int | None:
        return None

    def resume_in_background(self, *, retry_failed: bool = False) -> Path | None:
        return None

    def resume_failed(self) -> str | None:
        return None

    async def aclose(self) -> None:
        return None


if __name__ == "__main__":
    print(f"{record()} events recorded in {RECORDING}", file=sys.stderr)
