"""A run seen and steered from outside the process that drives it: what `swarm-tui ctl`, `runs`,
the MCP server and the Python API read and send.

Light on purpose: it reads the journal read-only (a WAL reader never blocks the writer), the run
directory's lock and the driver's heartbeat, and writes only to the control queue, importing
nothing of the engine, the providers or Textual: a script's `ctl RUN status --json` answers in a
fraction of a second on a run of any size.

* **Who drives a run** (`Driver`): a process whose heartbeat is fresh drives it live; one that
  holds the run's lock but is silent is stopped (SIGSTOP) or between runs (a console left open);
  nobody at all: the run stopped, finished, or its writer died mid-run. `RunState` says which.
* **Where it stands** (`RunStatus`): a live run's counts, waits, failures by class, phase, limit,
  cost, rates and ETA are its driver's pulse (`journal.control.Pulse`, one row); a run nobody
  drives is counted from the journal's tables. Each endpoint's health is read from the last
  attempts journaled.
* **Steering** (`RemoteRun.send`): a command into the control queue, which the driving session
  applies within half a second and answers (`wait_taken`), its effect journaled as a key's.
* **A driver of its own** (`launch_driver`): `swarm-tui run|resume ... --headless` as a process in
  its own session (it outlives the caller and its terminal), its output in a log in the run
  directory: how a run nobody drives is resumed from `attach` and `ctl`, and how the MCP server
  starts runs that outlive it.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from swarm_tui.core.errors import InputError
from swarm_tui.core.task import JSONObject
from swarm_tui.journal import JOURNAL_NAME, Journal
from swarm_tui.journal.control import CommandState, Heartbeat
from swarm_tui.run.directory import lock_holder
from swarm_tui.util.json_repair import JsonExtractionError, extract_json

HEARTBEAT_STALE_S = 3.0
"""The writer beats every 0.5 s; three seconds of silence means nobody drives the run."""
RECENT_ATTEMPTS = 200
"""How many of the last attempts an endpoint's health is read from."""
TAKEN_TIMEOUT_S = 10.0
"""How long a command waits to be taken by the driving session (it polls every 0.5 s)."""
ANSWER_GRACE_S = 1.0
"""A command taken and not answered this long after: its driver predates the answers."""
STATES = ("queued", "running", "retrying", "succeeded", "failed", "cancelled")
"""A task's states (`TaskState`'s values), in the order a status lists them."""
ENDED_PHASES = ("DONE", "FINISHED", "ABORTED")
"""The phases a run's last pulse has once it ended (`view.phase`): its driver takes no more commands."""


def process_alive(pid: int | None) -> bool | None:
    """True/False for a pid on this machine; None when it cannot be told."""
    if not pid:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return None
    return True


def process_stopped(pid: int | None) -> bool | None:
    """Whether `pid` is stopped (SIGSTOP, Ctrl-Z, a debugger), from /proc; None where it cannot be told."""
    if not pid:
        return None
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    state = stat.rpartition(")")[2].split()[:1]  # the name in parentheses may hold spaces
    return bool(state) and state[0] in ("T", "t")


class RunState(StrEnum):
    """Where a run stands, seen from outside."""

    STARTING = "starting"
    """A process holds the run and has not beaten yet."""
    RUNNING = "running"
    PAUSED = "paused"
    """Driven live, sending nothing new."""
    SUSPENDED = "suspended"
    """Its process holds it but is stopped (SIGSTOP, Ctrl-Z): it goes on when continued."""
    SILENT = "silent"
    """Its process holds it but has not beaten for a while (stuck, or busy writing its outputs)."""
    FINISHED = "finished"
    """Ended with every task final (succeeded or failed); `counts` says how."""
    STOPPED = "stopped"
    """Ended (stopped, aborted, or never started) with work left: resumable."""
    DEAD = "dead"
    """Its writer died mid-run (killed, a crash, a power cut): resumable."""

    @property
    def driven(self) -> bool:
        """A process drives the run (commands reach it)."""
        return self in (RunState.RUNNING, RunState.PAUSED)


@dataclass(frozen=True)
class EndpointHealth:
    """An endpoint over the last attempts journaled: how many, how they ended, how fast."""

    attempts: int
    ok: int
    errors: dict[str, int]
    """Failed attempts by error class (retried or final)."""
    p50_ms: float | None
    last_error: str | None

    @property
    def error_rate(self) -> float:
        return round((self.attempts - self.ok) / self.attempts, 4) if self.attempts else 0.0

    def to_json(self) -> JSONObject:
        return {
            "attempts": self.attempts,
            "ok": self.ok,
            "error_rate": self.error_rate,
            "errors": self.errors,
            "p50_ms": self.p50_ms,
            "last_error": self.last_error,
        }


@dataclass(frozen=True)
class RunStatus:
    """Where a run stands: `ctl status`, the MCP server's `swarm_status`, the API's `status()`.
    `to_json` gives its stable keys (the documentation's reference lists them)."""

    run_dir: Path
    job: str
    state: RunState
    pid: int | None
    """The process that drives (or holds) the run; None: nobody."""
    heartbeat_age_s: float | None
    liveness: str
    """Who drives the run, in a few words."""
    provider: str
    model: str | None
    total: int
    counts: dict[str, int]
    waiting: dict[str, int] = field(default_factory=dict)
    failed_by_class: dict[str, int] = field(default_factory=dict)
    cost_usd: float | None = None
    requests_per_s: float = 0.0
    tokens_per_s: float = 0.0
    eta_s: float | None = None
    phase: str = ""
    phase_detail: str = ""
    paused: bool = False
    limit: int | None = None
    ceiling: int | None = None
    gate_s: float = 0.0
    endpoints: dict[str, EndpointHealth] = field(default_factory=dict)
    created_at: float | None = None
    holder: int | None = None
    """A process that holds the run's lock without driving it (stopped, silent, a console left
    open after the run ended): no other process can drive it meanwhile."""

    @property
    def done(self) -> int:
        return self.counts.get("succeeded", 0) + self.counts.get("failed", 0)

    @property
    def unfinished(self) -> int:
        return self.total - self.done

    @property
    def next_step(self) -> str | None:
        """What to do next, as a command (None: nothing)."""
        run = str(self.run_dir)
        if self.state in (RunState.STOPPED, RunState.DEAD):
            return f"swarm-tui ctl {run} resume"
        if self.state is RunState.FINISHED and self.counts.get("failed"):
            return f"swarm-tui ctl {run} resume --retry-failed"
        if self.state is RunState.PAUSED:
            return f"swarm-tui ctl {run} resume"
        if self.state is RunState.SUSPENDED and self.pid:
            return f"kill -CONT {self.pid}"
        return None

    def to_json(self) -> JSONObject:
        return {
            "run": str(self.run_dir),
            "job": self.job,
            "state": self.state.value,
            "live": self.state.driven,
            "pid": self.pid,
            "heartbeat_age_s": self.heartbeat_age_s,
            "liveness": self.liveness,
            "provider": self.provider,
            "model": self.model,
            "total": self.total,
            "done": self.done,
            "counts": self.counts,
            "waiting": self.waiting,
            "failed_by_class": self.failed_by_class,
            "cost_usd": self.cost_usd,
            "requests_per_s": self.requests_per_s,
            "tokens_per_s": self.tokens_per_s,
            "eta_s": self.eta_s,
            "phase": self.phase,
            "phase_detail": self.phase_detail,
            "paused": self.paused,
            "limit": self.limit,
            "ceiling": self.ceiling,
            "gate_s": self.gate_s,
            "endpoints": {name: health.to_json() for name, health in self.endpoints.items()},
            "created_at": self.created_at,
            "holder": self.holder,
            "next": self.next_step,
        }

    def describe(self) -> str:
        """The status as a few lines for a person."""
        counts = ", ".join(f"{self.counts[s]:,} {s}" for s in STATES if self.counts.get(s))
        lines = [
            f"{self.run_dir}: {self.state.value} · {self.liveness}",
            f"job {self.job or '?'} · {self.provider}{f' / {self.model}' if self.model else ''}",
            f"{self.done:,}/{self.total:,} done ({counts or 'no tasks'})",
        ]
        waits = ", ".join(f"{n:,} {reason.replace('_', ' ')}" for reason, n in self.waiting.items() if n)
        if waits and self.state.driven:
            lines.append(f"waiting: {waits}")
        if self.failed_by_class:
            lines.append("failed: " + ", ".join(f"{n:,} {kind}" for kind, n in self.failed_by_class.items()))
        cost = f"${self.cost_usd:.4f}" if self.cost_usd is not None else "price unknown"
        figures = [f"cost {cost}"]
        if self.state.driven:
            figures.append(f"{self.requests_per_s:.1f} req/s")
            if self.eta_s is not None:
                figures.append(f"ETA {_clock(self.eta_s)}")
            if self.limit is not None:
                figures.append(f"limit {self.limit}" + (f"/{self.ceiling}" if self.ceiling else ""))
        if self.phase:
            figures.append(self.phase.lower() + (f" ({self.phase_detail})" if self.phase_detail else ""))
        lines.append(" · ".join(figures))
        if self.gate_s > 0:
            lines.append(f"the provider's Retry-After holds every call for {self.gate_s:.0f}s")
        for name, health in self.endpoints.items():
            p50 = f", p50 {health.p50_ms:.0f} ms" if health.p50_ms is not None else ""
            errors = ", ".join(f"{n} {kind}" for kind, n in health.errors.items())
            lines.append(
                f"endpoint {name}: {health.ok}/{health.attempts} of the last attempts ok{p50}"
                + (f" ({errors})" if errors else "")
            )
        if self.next_step:
            lines.append(f"next: {self.next_step}")
        return "\n".join(lines)


@dataclass(frozen=True)
class TaskRow:
    """One task as `ctl agents` lists it."""

    index: int
    custom_id: str
    state: str
    attempts: int

    def to_json(self) -> JSONObject:
        return {"index": self.index, "custom_id": self.custom_id, "state": self.state, "attempts": self.attempts}


@dataclass(frozen=True)
class TaskResult:
    """A finished task's answer (or final error), as `results` pages them."""

    index: int
    custom_id: str
    ok: bool
    answer: str | None
    """The answer's text (its first choice's message content)."""
    parsed: object
    """The JSON the answer holds, when it holds some (code fences and a cut ending repaired); else None."""
    error: JSONObject | None

    def to_json(self) -> JSONObject:
        return {
            "index": self.index,
            "custom_id": self.custom_id,
            "ok": self.ok,
            "answer": self.answer,
            "parsed": self.parsed,
            "error": self.error,
        }


@dataclass(frozen=True)
class ResultsPage:
    """A page of a run's finished tasks: `total` of them in all (of the state asked), from `offset`."""

    total: int
    offset: int
    results: list[TaskResult]

    @property
    def next_offset(self) -> int | None:
        end = self.offset + len(self.results)
        return end if end < self.total else None

    def to_json(self) -> JSONObject:
        return {
            "total": self.total,
            "offset": self.offset,
            "next_offset": self.next_offset,
            "results": [r.to_json() for r in self.results],
        }


@dataclass(frozen=True)
class TaskDetail:
    """One task in full, as `ctl show` gives it: its request, every attempt, its answer or error."""

    index: int
    custom_id: str
    state: str
    request: JSONObject
    attempts: list[JSONObject]
    result: TaskResult | None

    def to_json(self) -> JSONObject:
        return {
            "index": self.index,
            "custom_id": self.custom_id,
            "state": self.state,
            "request": self.request,
            "attempts": self.attempts,
            "answer": self.result.answer if self.result else None,
            "parsed": self.result.parsed if self.result else None,
            "error": self.result.error if self.result else None,
        }


@dataclass(frozen=True)
class CommandSent:
    """A command put in a run's control queue, and what became of it within the wait."""

    command: str
    id: int
    taken: bool
    result: JSONObject | None

    def to_json(self) -> JSONObject:
        return {"command": self.command, "id": self.id, "taken": self.taken, "result": self.result}


class NotDriven(Exception):
    """A command for a run no process drives: nothing would take it (`ctl RUN resume` starts a driver)."""

    def __init__(self, status: RunStatus) -> None:
        super().__init__(f"{status.run_dir}: nobody drives this run ({status.liveness})")
        self.status = status


def is_run_dir(path: Path) -> bool:
    return (path / JOURNAL_NAME).is_file()


class RemoteRun:
    """A run directory seen and steered from outside its driving process (see the module)."""

    def __init__(self, run_dir: Path, *, clock: Callable[[], float] = time.time) -> None:
        self.run_dir = Path(run_dir)
        self.journal = Journal.open(self.run_dir, readonly=True, up_to_date=True)
        self._clock = clock
        self._commands: Journal | None = None

    def close(self) -> None:
        self.journal.close()
        if self._commands is not None:
            self._commands.close()
            self._commands = None

    def __enter__(self) -> RemoteRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------- who drives it

    def heartbeat(self) -> Heartbeat | None:
        return self.journal.control.last_heartbeat()

    def status(self) -> RunStatus:
        """Where the run stands now (see the module)."""
        journal = self.journal
        meta = journal.queries.meta()
        beat = Heartbeat.from_json(meta.get("heartbeat"))
        now = self._clock()
        age = round(max(0.0, now - beat.at), 2) if beat is not None else None
        pulse = beat.pulse if beat is not None else None
        job = str((meta.get("job") or {}).get("name") or self.run_dir.name)
        provider = str(((meta.get("plan") or {}).get("profile") or {}).get("name") or "")
        created = meta.get("created_at")
        created_at = float(created) if isinstance(created, int | float) else None
        model = pulse.model if pulse is not None else None
        live = (
            beat is not None
            and age is not None
            and age <= HEARTBEAT_STALE_S
            and process_alive(beat.pid) is not False
            and (pulse is None or pulse.phase not in ENDED_PHASES)
        )
        endpoints = self._endpoint_health()
        if live and beat is not None and pulse is not None:
            state = RunState.PAUSED if pulse.paused else RunState.RUNNING
            liveness = f"live · pid {beat.pid} · beat {age:.1f}s ago"
            return RunStatus(
                self.run_dir,
                job,
                state,
                beat.pid,
                age,
                liveness,
                pulse.provider or provider,
                model,
                pulse.total,
                {s: pulse.counts.get(s, 0) for s in STATES},
                dict(pulse.waiting),
                dict(pulse.failed_by_class),
                pulse.cost_usd,
                pulse.requests_per_s,
                pulse.tokens_per_s,
                pulse.eta_s,
                pulse.phase,
                pulse.phase_detail,
                pulse.paused,
                pulse.limit,
                pulse.ceiling,
                pulse.gate_s,
                endpoints,
                created_at,
            )
        counts = {s: 0 for s in STATES} | journal.queries.counts()
        total = sum(counts.values())
        holder = lock_holder(self.run_dir)
        ended = journal.history.run_ended()
        started = journal.queries.has_attempts() or journal.history.has_batches()
        if live and beat is not None:  # a driver too old to say its pulse: counted from the tables
            state, liveness = RunState.RUNNING, f"live · pid {beat.pid} · beat {age:.1f}s ago"
        elif holder is not None and process_stopped(holder):
            state, liveness = RunState.SUSPENDED, f"stopped (SIGSTOP?) · pid {holder}: it goes on when continued"
        elif holder is not None and not ended:
            if beat is None or (not started and (age or 0.0) < 30):
                state, liveness = RunState.STARTING, f"pid {holder} is starting it"
            else:
                state, liveness = RunState.SILENT, f"pid {holder} holds the run but is silent for {age or 0:.0f}s"
        elif not ended:
            state, liveness = RunState.DEAD, "its writer died mid-run: nobody drives it"
        else:
            unfinished = total - counts["succeeded"] - counts["failed"]
            state = RunState.STOPPED if unfinished or not started else RunState.FINISHED
            liveness = (
                f"ended; pid {holder} still holds it (a console left open?)"
                if holder is not None
                else "nobody drives it"
            )
        spent, unpriced = journal.queries.spend()
        last_pid = beat.pid if beat is not None else None
        pid = holder if holder is not None else last_pid if state in (RunState.DEAD, RunState.RUNNING) else None
        failed = journal.queries.failed_classes() if counts["failed"] else {}
        by_class: dict[str, int] = {}
        for kind in failed.values():
            by_class[kind] = by_class.get(kind, 0) + 1
        return RunStatus(
            self.run_dir,
            job,
            state,
            pid,
            age,
            liveness,
            provider,
            model,
            total,
            counts,
            {},
            dict(sorted(by_class.items(), key=lambda item: -item[1])),
            round(spent, 6) if not unpriced else None,
            phase="",
            endpoints=endpoints,
            created_at=created_at,
            holder=None if state.driven else holder,
        )

    def _endpoint_health(self) -> dict[str, EndpointHealth]:
        rows = self.journal.queries.recent_attempts(RECENT_ATTEMPTS)
        grouped: dict[str, list[tuple[str, str | None, float, str | None]]] = {}
        for endpoint, outcome, kind, latency, message in rows:
            if endpoint == "cache":
                continue  # a replay is no endpoint's
            grouped.setdefault(endpoint, []).append((outcome, kind, latency, message))
        health: dict[str, EndpointHealth] = {}
        for endpoint, attempts in sorted(grouped.items()):
            ok = sorted(latency for outcome, _, latency, _ in attempts if outcome == "ok")
            errors: dict[str, int] = {}
            last_error = None
            for outcome, kind, _, message in attempts:  # newest first
                if outcome != "ok" and kind:
                    errors[kind] = errors.get(kind, 0) + 1
                    last_error = last_error or message
            health[endpoint] = EndpointHealth(
                len(attempts), len(ok), errors, round(ok[len(ok) // 2], 1) if ok else None, last_error
            )
        return health

    # ----------------------------------------------------------------- its tasks and answers

    def resolve(self, refs: Iterable[str]) -> list[int]:
        """Tasks named by custom_id, or by `#N` (agent N as the console numbers them, from 1);
        InputError naming those the run does not hold."""
        refs = list(refs)
        ids = [r for r in refs if not _agent_number(r)]
        found = self.journal.queries.indices_of(ids)
        low, high = self.journal.queries.task_index_bounds()
        indices: list[int] = []
        missing: list[str] = []
        for ref in refs:
            number = _agent_number(ref)
            if number is not None and low <= number - 1 < high:
                indices.append(number - 1)
            elif ref in found:
                indices.append(found[ref])
            else:
                missing.append(ref)
        if missing:
            shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
            why = f"no task {shown} in this run (a custom_id, or #N for agent N)"
            raise InputError.single(self.run_dir, "task", why)
        return indices

    def tasks(self, state: str | None = None, offset: int = 0, limit: int = 1000) -> list[TaskRow]:
        """The run's tasks (in `state`, as the journal keeps it), in order."""
        if state is not None and state not in STATES:
            raise InputError.single("--state", "state", f"unknown state {state!r} (known: {', '.join(STATES)})")
        return [TaskRow(*row) for row in self.journal.queries.task_page(state, offset, limit)]

    def results(self, state: str | None = None, offset: int = 0, limit: int = 100) -> ResultsPage:
        """A page of the finished tasks' answers and errors: `state` succeeded, failed, or both (None)."""
        if state not in (None, "succeeded", "failed"):
            raise InputError.single("state", "state", f"results are of succeeded or failed tasks, not {state!r}")
        ok = None if state is None else state == "succeeded"
        queries = self.journal.queries
        counts = queries.counts()
        total = counts.get("succeeded", 0) if ok else counts.get("failed", 0) if ok is False else queries.result_count()
        rows = queries.result_page(ok, max(0, offset), max(0, limit))
        return ResultsPage(total, max(0, offset), [_result(*row) for row in rows])

    def show(self, ref: str) -> TaskDetail:
        """One task in full (by custom_id, or `#N`)."""
        index = self.resolve([ref])[0]
        queries = self.journal.queries
        [(_, custom_id, body)] = queries.task_window(index, index + 1)
        found = queries.result_of(index)
        result = None
        if found is not None:
            response = found["response"]
            answer = answer_text(response) if isinstance(response, Mapping) else None
            result = TaskResult(index, custom_id, found["ok"], answer, parsed_answer(answer), found["error"])
        state = queries.state_of(index) or "queued"
        return TaskDetail(index, custom_id, state, body, queries.attempts_of(index), result)

    # ----------------------------------------------------------------- steering

    def send(
        self, command: str, args: Mapping[str, object] | None = None, *, wait_s: float = TAKEN_TIMEOUT_S
    ) -> CommandSent:
        """Put a command in the control queue for the driving session, and wait up to `wait_s` for
        it to be taken and answered. NotDriven when no process drives the run (nothing would take
        it: `launch_driver` starts one)."""
        status = self.status()
        if not (status.state.driven or status.state is RunState.STARTING):
            raise NotDriven(status)
        if self._commands is None:
            self._commands = Journal.open(self.run_dir)
        command_id = self._commands.control.send_command(command, {"by": "ctl", **(args or {})})
        state = self.wait_taken(command_id, wait_s)
        return CommandSent(command, command_id, state is not None, state.result if state else None)

    def wait_taken(self, command_id: int, timeout_s: float) -> CommandState | None:
        """The command's state once the driving session has taken and answered it (a driver too
        old to answer: a second after it took it, its result None); None when it was not taken
        within `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while True:
            state = self.journal.control.state_of(command_id)
            if state is not None and state.taken_at is not None:
                if state.result is not None or self._clock() - state.taken_at > ANSWER_GRACE_S:
                    return state
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.05)

    def wait(self, timeout_s: float | None = None, *, poll_s: float = 0.5) -> RunStatus:
        """The run's status once nobody drives it any more (it ended, stopped or died), or at
        `timeout_s` (None: no limit)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            status = self.status()
            busy = status.state.driven or status.state in (RunState.STARTING, RunState.SILENT)
            if not busy or (deadline is not None and time.monotonic() >= deadline):
                return status
            time.sleep(poll_s if deadline is None else max(0.0, min(poll_s, deadline - time.monotonic())))


def answer_text(response: Mapping[str, object]) -> str | None:
    """The text of a chat completion's first choice (None: it has none)."""
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        return None
    message = choices[0].get("message")
    content = message.get("content") if isinstance(message, Mapping) else None
    return content if isinstance(content, str) else None


def parsed_answer(answer: str | None) -> object:
    """The JSON an answer holds (code fences, a cut ending repaired), or None."""
    if not answer or not any(c in answer for c in "{["):
        return None
    try:
        return extract_json(answer)
    except JsonExtractionError:
        return None


def _result(index: int, custom_id: str, ok: bool, response: str | None, error: str | None) -> TaskResult:
    body = json.loads(response) if response else None
    answer = answer_text(body) if isinstance(body, Mapping) else None
    return TaskResult(index, custom_id, ok, answer, parsed_answer(answer), json.loads(error) if error else None)


def _agent_number(ref: str) -> int | None:
    """`#N`: agent N (from 1); None for anything else."""
    return int(ref[1:]) if ref.startswith("#") and ref[1:].isdigit() and int(ref[1:]) > 0 else None


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02}:{rest % 60:02}" if hours else f"{rest // 60:02}:{rest % 60:02}"


# --------------------------------------------------------------------------- every run under a root


def find_runs(root: Path) -> list[Path]:
    """The run directories directly under `root` (and `root` itself when it is one), oldest first."""
    if is_run_dir(root):
        return [root]
    try:
        found = [p for p in root.iterdir() if p.is_dir() and is_run_dir(p)]
    except OSError as exc:
        raise InputError.single(root, "runs", f"cannot be read: {exc.strerror or exc}") from None
    return sorted(found, key=lambda p: ((p / JOURNAL_NAME).stat().st_mtime, p.name))


def list_runs(root: Path) -> list[RunStatus]:
    """The status of every run under `root` (one whose journal cannot be read is left out)."""
    statuses: list[RunStatus] = []
    for run_dir in find_runs(root):
        with contextlib.suppress(Exception):  # a journal half made, damaged, or removed meanwhile
            with RemoteRun(run_dir) as run:
                statuses.append(run.status())
    return statuses


# --------------------------------------------------------------------------- a driver of its own


def launch_driver(args: Sequence[str], log: Path) -> subprocess.Popen[bytes]:
    """`swarm-tui ARGS` (a `run ... --headless` or `resume RUN --headless`) as a process of its own
    session: it outlives the caller and its terminal, its output appended to `log`."""
    command = [sys.executable, "-m", "swarm_tui", *args]
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        return subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def resume_detached(run_dir: Path, *, retry_failed: bool = False) -> tuple[subprocess.Popen[bytes], Path]:
    """Resume a run nobody drives in a process of its own (`swarm-tui resume RUN_DIR --headless`),
    its output appended to RUN_DIR/resume.log: the process and the log's path."""
    log = run_dir / RESUME_LOG
    args = ["resume", str(run_dir.resolve()), "--headless", *(["--retry-failed"] if retry_failed else [])]
    return launch_driver(args, log), log


RESUME_LOG = "resume.log"
"""Where a driver started for a stored run writes its output (in its run directory)."""


def log_tail(log: Path) -> str:
    """A driver's log's last line that says something (why it ended early)."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return next((line for line in reversed(lines) if line.strip()), "")
