"""The Python API: start a swarm, watch it, steer it and read its answers, from your own program.

    import asyncio
    from swarm_tui.api import open_run

    async def main() -> None:
        async with open_run(["Name a prime.", "Name a colour."], out="runs/mine") as run:
            outcome = await run.wait()
            for result in run.results():
                print(result.custom_id, result.answer)

    asyncio.run(main())

Three ways in, one way to start a run:

* `open_run(job_or_prompts, ...)` runs the swarm in this process (an async context manager): a
  `Run` to iterate for its events, `wait()` for, read `results()` from and steer (`pause`,
  `resume`, `retry_failed`, `cancel`, `set_limit`, `abort`). Leaving the block waits for the run
  to end (an exception in it aborts the run first; the journal stays resumable).
* `start_run(job_or_prompts, ...)` starts it as a process of its own (`swarm-tui run ... --headless`
  in its own session, its output in RUN/run.log): it outlives this program, and anyone reads and
  steers it through its directory (`RemoteRun`, `swarm-tui ctl`). The MCP server starts runs so.
* `RemoteRun(run_dir)` reads and steers a run any process drives; `list_runs(root)` lists them.

Both starts take a job file (`.jsonl`, `.toml`, a table with `template`) or a list of prompts
(written as the run's `prompts.toml`, a TOML job of one task a prompt), the endpoint (`provider`: a
profile of the config, `sim` by default; or `base_url` + `model`), and the run's settings
(`RunSettings`: each is a `swarm-tui run` flag). Both go the command line's way: a typed request,
resolved with the config and the job into a plan, checked whole (every problem at once, in an
`InputError`, before anything is written or sent), then opened (`new_session`, which the CLI's
`run` calls too).

Imported cheaply (what runs a swarm is imported when a run starts), so a script that only reads
runs loads no engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypedDict, Unpack

from swarm_tui.core.errors import InputError
from swarm_tui.core.events import EngineEvent, RunFinished
from swarm_tui.journal import JOURNAL_NAME
from swarm_tui.run.remote import STATES as TASK_STATES
from swarm_tui.run.remote import (
    CommandSent,
    NotDriven,
    RemoteRun,
    ResultsPage,
    RunState,
    RunStatus,
    TaskDetail,
    TaskResult,
    launch_driver,
    list_runs,
    log_tail,
    resume_detached,
)

if TYPE_CHECKING:
    import subprocess

    from swarm_tui.config import Config
    from swarm_tui.estimate import Estimate
    from swarm_tui.records import Summary
    from swarm_tui.run.preflight import Check
    from swarm_tui.run.request import ResumeRequest, RunRequest
    from swarm_tui.run.resolve import SessionPlan
    from swarm_tui.run.session import SwarmSession

__all__ = [
    "TASK_STATES",
    "CommandSent",
    "NotDriven",
    "RemoteRun",
    "ResultsPage",
    "Run",
    "RunOutcome",
    "RunSettings",
    "RunState",
    "RunStatus",
    "Started",
    "StartFailed",
    "TaskDetail",
    "TaskResult",
    "estimate_cost",
    "list_runs",
    "log_tail",
    "new_session",
    "open_run",
    "resume_detached",
    "resumed_session",
    "start_run",
]

Lane = Literal["live", "batch", "auto"]


class RunSettings(TypedDict, total=False):
    """A run's settings besides its job and endpoint, each as its `swarm-tui run` flag says; those
    not given are the job's, the profile's or the defaults."""

    api_key_env: str
    """`--api-key-env`: the environment variable that holds the key (never the key itself)."""
    concurrency: int
    """`--concurrency`: calls in flight at most (default 50)."""
    max_attempts: int
    """`--max-attempts`: attempts per task before it fails."""
    timeout_s: float
    """`--timeout`: one attempt's limit, in seconds."""
    rpm: int
    """`--rpm`: requests a minute at most."""
    tpm: int
    """`--tpm`: tokens a minute at most."""
    budget_usd: float
    """`--budget`: a ceiling on what the run may spend, in USD."""
    fail_on_error: float
    """`--fail-on-error`: stop once this share of the finished tasks failed."""
    lane: Lane
    """`--lane`: live calls, the provider's batch API, or the autopilot's mix."""
    stream: bool
    """`--stream`: stream the answers (time to the first token and between chunks are watched)."""
    system: str
    """A list of prompts: each task's system message (`{agent}`, `{total}` are filled in)."""
    template: str
    """A list of prompts: each prompt put in this text where it says `{prompt}`. A table job: what
    to ask of each row, over its columns (`--prompt`)."""
    max_tokens: int
    """A list of prompts: each request's `max_tokens`."""
    sim_latency_ms: float
    """`--sim-latency-ms`: the embedded simulator's median latency."""
    sim_error_rate: float
    """`--sim-error-rate`: the share of the simulator's calls that fail (429s and 5xx)."""
    sim_seed: int
    """`--sim-seed`: the simulator's seed."""


FLAGS: dict[str, str] = {
    "api_key_env": "--api-key-env",
    "concurrency": "--concurrency",
    "max_attempts": "--max-attempts",
    "timeout_s": "--timeout",
    "rpm": "--rpm",
    "tpm": "--tpm",
    "budget_usd": "--budget",
    "fail_on_error": "--fail-on-error",
    "lane": "--lane",
    "stream": "--stream",
    "sim_latency_ms": "--sim-latency-ms",
    "sim_error_rate": "--sim-error-rate",
    "sim_seed": "--sim-seed",
}
"""Each setting that is a `swarm-tui run` flag, and the flag (a detached run is started with them)."""
JOB_SETTINGS = ("system", "template", "max_tokens")
"""The settings that make a list of prompts a job (`template` is a table job's `--prompt` too)."""
PROMPTS_JOB = "prompts.toml"
"""The job a list of prompts becomes, in its run's directory (`run.directory.LAUNCH_FILES`)."""
RUN_LOG = "run.log"
"""A run started as a process of its own writes its output here, in its run directory."""
SIM_MODEL = "sim-1"


JobOrPrompts = str | os.PathLike[str] | Sequence[str]
"""A job file's path, or the prompts of a run of one task each (a list or tuple of texts)."""


# --------------------------------------------------------------------------- one way to start a run


def new_session(
    request: RunRequest, config: Config | None = None, *, also: Sequence[Check] = ()
) -> tuple[SwarmSession, SessionPlan]:
    """A new run opened from a request: resolved with the config and the job into a plan, the plan
    checked whole (`also`: a front end's own checks; InputError with every problem, nothing written
    or sent), then the session opened on it. The command line's `run` and `open_run` both start so."""
    from swarm_tui.config import load_config
    from swarm_tui.run.preflight import preflight, refuse
    from swarm_tui.run.resolve import resolve_run
    from swarm_tui.run.session import SwarmSession

    config = config or load_config()
    plan = resolve_run(request, config)
    refuse(preflight(plan, config, also=also))
    assert plan.job is not None  # a new run's plan holds its job
    session = SwarmSession.open_new(plan.job, plan.run, plan.run_dir, ray=plan.ray, judge_profile=plan.judge_profile)
    return session, plan


def resumed_session(
    request: ResumeRequest, config: Config | None = None, *, also: Sequence[Check] = ()
) -> tuple[SwarmSession, SessionPlan]:
    """A stored run going on: held (its lock, journal and meta, once), the request resolved over its
    plan and checked, then the journal's new session begun; a refusal releases the run untouched."""
    from swarm_tui.config import load_config
    from swarm_tui.run.preflight import preflight, refuse
    from swarm_tui.run.resolve import resolve_resume
    from swarm_tui.run.session import SwarmSession
    from swarm_tui.run.stored import StoredRun

    config = config or load_config()
    stored = StoredRun.open(request.run_dir)
    with stored.released_on_error():
        plan = resolve_resume(request, config, stored)
        refuse(preflight(plan, config, also=also))
        session = SwarmSession.open_existing(stored, plan.run, retry_failed=plan.retry_failed, ray=plan.ray)
    return session, plan


def run_request(
    job: Path,
    *,
    out: Path,
    provider: str | None,
    base_url: str | None,
    model: str | None,
    settings: RunSettings,
) -> RunRequest:
    """The request the command line would make of `swarm-tui run JOB --headless` with these flags."""
    from swarm_tui.run.request import (
        ConsoleRequest,
        EngineRequest,
        ProviderRequest,
        RunOptions,
        RunRequest,
        SimRequest,
        TableRequest,
    )

    table = TableRequest(prompt=settings.get("template"), system=settings.get("system")) if _is_table(job) else None
    return RunRequest(
        job=job,
        out=out,
        table=table or TableRequest(),
        options=RunOptions(
            provider=ProviderRequest(
                provider=provider, base_url=base_url, model=model, api_key_env=settings.get("api_key_env")
            ),
            engine=EngineRequest(
                concurrency=settings.get("concurrency"),
                max_attempts=settings.get("max_attempts"),
                timeout_s=settings.get("timeout_s"),
                rpm=settings.get("rpm"),
                tpm=settings.get("tpm"),
                stream=bool(settings.get("stream")),
                budget_usd=settings.get("budget_usd"),
                fail_on_error=settings.get("fail_on_error"),
                lane=settings.get("lane"),
            ),
            sim=SimRequest(
                latency_ms=settings.get("sim_latency_ms"),
                error_rate=settings.get("sim_error_rate"),
                seed=settings.get("sim_seed"),
            ),
            console=ConsoleRequest(headless=True),
        ),
    )


def run_argv(
    job: Path,
    *,
    out: Path,
    provider: str | None,
    base_url: str | None,
    model: str | None,
    settings: RunSettings,
) -> list[str]:
    """`swarm-tui run` with the flags that make the same request as `run_request` (a detached run)."""
    argv = ["run", str(job), "--headless", "--log-format", "json", "--out", str(out)]
    for flag, value in (("--provider", provider), ("--base-url", base_url), ("--model", model)):
        if value is not None:
            argv += [flag, value]
    if _is_table(job):
        for key, flag in (("template", "--prompt"), ("system", "--system")):
            if settings.get(key) is not None:
                argv += [flag, str(settings.get(key))]
    for key, flag in FLAGS.items():
        setting = settings.get(key)
        if setting is None or setting is False:
            continue
        argv += [flag] if setting is True else [flag, str(setting)]
    return argv


def _is_table(job: Path) -> bool:
    return job.suffix.lower() in (".csv", ".parquet") or job.is_dir() or _is_records(job)


def _is_records(job: Path) -> bool:
    if job.suffix.lower() != ".jsonl" or not job.is_file():
        return False
    from swarm_tui.jobs.table_files import is_batch_jsonl

    return not is_batch_jsonl(job)


def _check_settings(settings: RunSettings) -> None:
    unknown = sorted(set(settings) - set(RunSettings.__annotations__))
    if unknown:
        raise TypeError(f"unknown run settings: {', '.join(unknown)} (known: {', '.join(RunSettings.__annotations__)})")


def _job_of(
    job_or_prompts: JobOrPrompts,
    out: Path,
    *,
    provider: str | None,
    base_url: str | None,
    model: str | None,
    settings: RunSettings,
) -> Path:
    """The job file of a run: the path given, or its prompts written as OUT/prompts.toml."""
    if isinstance(job_or_prompts, str | os.PathLike):
        return Path(job_or_prompts)
    prompts = list(job_or_prompts)
    if not prompts or not all(isinstance(p, str) for p in prompts):
        raise InputError.single("prompts", "prompts", "a list of one or more texts (each a task's prompt)")
    on_sim = base_url is None and provider in (None, "sim")
    write_prompts_job(
        out / PROMPTS_JOB,
        prompts,
        model=model or (SIM_MODEL if on_sim else None),
        system=settings.get("system"),
        template=settings.get("template"),
        max_tokens=settings.get("max_tokens"),
    )
    return out / PROMPTS_JOB


def write_prompts_job(
    path: Path,
    prompts: Sequence[str],
    *,
    model: str | None,
    system: str | None = None,
    template: str | None = None,
    max_tokens: int | None = None,
) -> None:
    """A list of prompts as a TOML job (`[[task]]` a prompt, ids `prompt-001`...), the prompts'
    braces kept as written; `template`'s `{prompt}` takes each one (its `{agent}`, `{total}` are
    filled in as a TOML job's are)."""
    import tomli_w

    from swarm_tui.run.directory import prepare_new

    prepare_new(path.parent)
    width = len(str(len(prompts)))
    tasks = []
    for number, prompt in enumerate(prompts, 1):
        literal = prompt.replace("{", "{{").replace("}", "}}")
        text = template.replace("{prompt}", literal) if template else literal
        tasks.append({"id": f"prompt-{number:0{width}}", "prompt": text})
    doc: dict[str, object] = {"name": "prompts"}
    if model:
        doc["model"] = model
    if system:
        doc["system"] = system
    if max_tokens is not None:
        doc["request"] = {"max_tokens": max_tokens}
    doc["task"] = tasks
    path.write_text(tomli_w.dumps(doc), encoding="utf-8")


def _out_of(out: str | os.PathLike[str] | None, job_or_prompts: JobOrPrompts, root: Path = Path("runs")) -> Path:
    if out is not None:
        return Path(out)
    from swarm_tui.run.directory import default_run_dir

    name = Path(job_or_prompts).stem if isinstance(job_or_prompts, str | os.PathLike) else "prompts"
    return default_run_dir(name, root)


# --------------------------------------------------------------------------- a run in this process


@dataclass(frozen=True)
class RunOutcome:
    """How a run (or this session of it) ended: its counts, its exit code (0, 1, 130 as the command
    line's), and summary.json's record (None when its outputs were left for `swarm-tui export`)."""

    run_dir: Path
    succeeded: int
    failed: int
    unfinished: int
    aborted: bool
    stop_reason: str | None
    exit_code: int
    summary: Summary | None
    output_error: str | None
    """Why results.jsonl and summary.json could not be written, if they could not."""


class Run:
    """A run this process drives (`open_run`): iterate it for its events, `wait()` for its end,
    read its answers, steer it. Each steering call does what the console's key does (its effect
    journaled as the key's)."""

    def __init__(self, session: SwarmSession) -> None:
        """Start running `session` in the running event loop (`open_run` makes a run so)."""
        self._session = session
        self.run_dir = session.run_dir
        self._listeners: list[asyncio.Queue[EngineEvent | None]] = []
        session.engine.subscribe(self._deliver)
        self._task: asyncio.Task[RunFinished] = asyncio.create_task(session.run(), name=f"swarm-run {self.run_dir}")
        self._task.add_done_callback(self._ended)

    def _deliver(self, event: EngineEvent) -> None:
        for queue in self._listeners:
            queue.put_nowait(event)

    def _ended(self, _: object) -> None:
        for queue in self._listeners:
            queue.put_nowait(None)

    @property
    def session(self) -> SwarmSession:
        """The session that runs the swarm (its journal, engine and plan)."""
        return self._session

    # ----------------------------------------------------------------- events and the end

    def __aiter__(self) -> AsyncIterator[EngineEvent]:
        return self.events()

    async def events(self) -> AsyncIterator[EngineEvent]:
        """The run's events (`swarm_tui.core.events`) from now on, in order, each once it is
        journaled; the iteration ends when the run does."""
        queue: asyncio.Queue[EngineEvent | None] = asyncio.Queue()
        if self._task.done():
            return
        self._listeners.append(queue)
        try:
            while (event := await queue.get()) is not None:
                yield event
        finally:
            self._listeners.remove(queue)

    async def wait(self) -> RunOutcome:
        """Wait for the run to end; how it ended."""
        finished = await asyncio.shield(self._task)
        return self._outcome(finished)

    def _outcome(self, finished: RunFinished) -> RunOutcome:
        from swarm_tui.run.exit_codes import exit_code

        session = self._session
        return RunOutcome(
            self.run_dir,
            finished.succeeded,
            finished.failed,
            finished.cancelled,
            finished.aborted,
            finished.stop_reason,
            exit_code(finished, session.output_error),
            session.summary,
            session.output_error,
        )

    @property
    def done(self) -> bool:
        return self._task.done()

    # ----------------------------------------------------------------- reading

    def status(self) -> RunStatus:
        """Where the run stands (as `swarm-tui ctl RUN status` says it)."""
        with RemoteRun(self.run_dir) as remote:
            return remote.status()

    def results(self, state: Literal["succeeded", "failed"] | None = None) -> list[TaskResult]:
        """Every finished task's answer (or final error) so far, in task order; `state`: only the
        answered ones, or only the failed ones."""
        with RemoteRun(self.run_dir) as remote:
            found: list[TaskResult] = []
            while True:
                page = remote.results(state, len(found), 1000)
                found += page.results
                if page.next_offset is None or not page.results:
                    return found

    def show(self, ref: str) -> TaskDetail:
        """One task in full: its request, attempts, answer (a custom_id, or `#N` for agent N)."""
        with RemoteRun(self.run_dir) as remote:
            return remote.show(ref)

    # ----------------------------------------------------------------- steering

    def pause(self, *, now: bool = False) -> int:
        """Send nothing new; `now`: hold the calls in flight too (sent again first at `resume`).
        Returns how many calls were held."""
        held = self._session.pause(now=now).get("held", 0)
        return held if isinstance(held, int) else 0

    def resume(self) -> None:
        self._session.engine.resume()

    def retry_failed(self, error_class: str | None = None) -> int:
        """Queue the failed tasks again (those whose last error is of `error_class`, e.g.
        `rate_limit`, or all); how many were queued."""
        return _count(self._session.retry(errored=error_class), "queued")

    def cancel(self, refs: Sequence[str]) -> int:
        """Stop these tasks now (custom_ids, or `#N`); each waits until retried by name."""
        with RemoteRun(self.run_dir) as remote:
            indices = remote.resolve(refs)
        return _count(self._session.cancel(indices), "cancelled")

    def set_limit(self, limit: int) -> int:
        """The concurrency ceiling (the adaptive limit moves under it); the limit now."""
        return self._session.engine.set_concurrency(max(1, limit), "api")

    def abort(self) -> None:
        """Cancel the calls in flight and send nothing new; the journal stays resumable."""
        self._session.engine.abort("aborted through the API")


def _count(result: dict[str, object], key: str) -> int:
    value = result.get(key, 0)
    return value if isinstance(value, int) else 0


@asynccontextmanager
async def open_run(
    job_or_prompts: JobOrPrompts,
    *,
    provider: str | None = None,
    base_url: str | None = None,
    model: str | None = None,
    out: str | os.PathLike[str] | None = None,
    **settings: Unpack[RunSettings],
) -> AsyncIterator[Run]:
    """Run a swarm in this process: a job file or a list of prompts, on `provider` (a profile of the
    config; the embedded simulator `sim` by default) or `base_url` + `model`, into `out` (default
    runs/<time>-<job name>). InputError (every problem at once) before anything is sent.

    The block's `Run` is running; leaving the block waits for its end (an exception raised in the
    block aborts it first, resumable), and closes it."""
    _check_settings(settings)
    run_dir = _out_of(out, job_or_prompts)
    job = _job_of(job_or_prompts, run_dir, provider=provider, base_url=base_url, model=model, settings=settings)
    request = run_request(job, out=run_dir, provider=provider, base_url=base_url, model=model, settings=settings)
    session, _ = new_session(request)
    try:
        run = Run(session)
        try:
            yield run
        except BaseException:
            session.engine.abort("the program that ran it raised")
            raise
        finally:
            with contextlib.suppress(Exception):
                await run.wait()
    finally:
        await session.aclose()


# --------------------------------------------------------------------------- a run of its own


@dataclass(frozen=True)
class Started:
    """A run started as a process of its own: its directory, the process, and its log."""

    run_dir: Path
    pid: int
    log: Path
    live: bool
    """Its driver beat before `start_run` returned (else it was still opening a large job)."""


class StartFailed(Exception):
    """The run's process ended before the run began: its log's last line says why."""


def start_run(
    job_or_prompts: JobOrPrompts,
    *,
    provider: str | None = None,
    base_url: str | None = None,
    model: str | None = None,
    out: str | os.PathLike[str] | None = None,
    root: str | os.PathLike[str] = "runs",
    wait_live_s: float = 30.0,
    **settings: Unpack[RunSettings],
) -> Started:
    """Start a swarm as a process of its own (`swarm-tui run JOB --headless` in its own session, its
    output in RUN/run.log): it outlives this program. The request is resolved and checked here
    first (InputError with every problem, nothing sent), so a bad one never starts; the process is
    waited for up to `wait_live_s` to go live. `out`: the run's directory (default a new one under
    `root`, named after the time and the job)."""
    from swarm_tui.config import load_config
    from swarm_tui.run.directory import prepare_new
    from swarm_tui.run.preflight import preflight, refuse
    from swarm_tui.run.resolve import resolve_run

    _check_settings(settings)
    run_dir = _out_of(out, job_or_prompts, Path(root))
    existed = run_dir.exists()
    job = _job_of(job_or_prompts, run_dir, provider=provider, base_url=base_url, model=model, settings=settings)
    try:
        if job != run_dir / PROMPTS_JOB:  # (a list of prompts made it already)
            prepare_new(run_dir)  # new, or empty: never another run's, never a user's files
        config = load_config()
        request = run_request(job, out=run_dir, provider=provider, base_url=base_url, model=model, settings=settings)
        refuse(preflight(resolve_run(request, config), config))
    except BaseException:
        _undo(run_dir, job, existed)
        raise
    argv = run_argv(job.resolve(), out=run_dir.resolve(), provider=provider, base_url=base_url, model=model,
                    settings=settings)  # fmt: skip
    process = launch_driver(argv, run_dir / RUN_LOG)
    live = _wait_live(run_dir, process, wait_live_s)
    return Started(run_dir, process.pid, run_dir / RUN_LOG, live)


def _undo(run_dir: Path, job: Path, existed: bool) -> None:
    """A start refused: the prompts' job written for it goes, and the directory if it was made for it."""
    if job.parent == run_dir and job.name == PROMPTS_JOB:
        job.unlink(missing_ok=True)
    if not existed:
        with contextlib.suppress(OSError):
            run_dir.rmdir()


def _wait_live(run_dir: Path, process: subprocess.Popen[bytes], timeout_s: float) -> bool:
    """Whether the started driver beats before `timeout_s`; StartFailed when it ends without a run."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        code = process.poll()
        made = (run_dir / JOURNAL_NAME).exists()
        if made:
            with contextlib.suppress(Exception), RemoteRun(run_dir) as remote:
                beat = remote.heartbeat()
                if beat is not None and beat.pid == process.pid:
                    return True
        if code is not None:
            if code == 0 and made:
                return True  # it ran to its end already
            raise StartFailed(f"the run exited {code}: {log_tail(run_dir / RUN_LOG)}")
        time.sleep(0.1)
    return False


# --------------------------------------------------------------------------- what a run would cost


def estimate_cost(
    tasks: int,
    *,
    input_tokens: float = 0,
    output_tokens: float = 512,
    cached_share: float = 0.0,
    models: Sequence[str] | None = None,
    providers: Sequence[str] | None = None,
) -> Estimate:
    """What `tasks` tasks of `input_tokens` in and `output_tokens` out cost on each price-table row
    of `models` (every model when None), live, at the Flex and Priority tiers and as batches: the
    `swarm-tui estimate` table for one run (the config's own prices included)."""
    from swarm_tui.config import load_config
    from swarm_tui.estimate import Scenario, build_estimate
    from swarm_tui.pricing import PriceTable

    config = load_config()
    table = PriceTable.builtin(config.prices, billing=config.billing, source=config.path)
    scenario = Scenario(
        agents=tasks,
        tasks_per_day=1,
        days=1,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cached_share=cached_share,
    )
    return build_estimate(
        scenario, models=list(models) if models else None, providers=list(providers) if providers else None, table=table
    )
