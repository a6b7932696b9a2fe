"""A run directory being worked on: journal + endpoint + engine, for a new run or a resume.

Both front ends (headless and the TUI) drive a `SwarmSession` the same way:
`open_new(...)` or `open_existing(...)`, then `await session.run()`, then `finalize()` writes
`results.jsonl`, `errors.jsonl` and `summary.json` from the journal, and `aclose()`.
The session also serves the journal's control queue, so `attach` in another terminal can
pause, resume, retry and abort this run.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import configured_currency
from .core.events import RunFinished, TaskQueued
from .core.task import Task
from .engine import EngineSettings, SwarmEngine, TaskState
from .engine.admission import AdmissionController
from .engine.ledger import BudgetReport, answer_ceiling, worst_usage
from .engine.pacing import RateLimits
from .errors import InputError, JournalWriteError
from .jobs import Job, TaskTemplate
from .journal import Journal, migrate
from .judge.judge import CONCURRENCY as JUDGE_CONCURRENCY
from .judge.judge import Judge
from .judge.spec import JudgeSpec
from .outputs import discard_outputs, summarize, write_outputs
from .pricing import PriceTable
from .providers.client import ProviderClient
from .providers.profile import ProviderProfile
from .rundir import JOURNAL_NAME, RunDirLock, describe_write_failure, discard_new, prepare_new
from .runlog import close_interrupted_run
from .sim import SimConfig, SimServer
from .swarm.pipeline import SwarmPipeline, drop_memory, json_validator
from .swarm.spec import SwarmSpec
from .tools import Toolbox, ToolsSpec

if TYPE_CHECKING:
    from .distributed.driver import RayEngine

CONTROL_POLL_S = 0.5

DEMO_SIM = SimConfig(latency_ms=700.0, latency_sigma=0.6, error_rate=0.1, seed=11547)
"""The embedded simulator of the demo: slow enough to watch, with about fifteen 5xx to retry, and
(this seed, the demo's 100 agents) agents 71 and 99 failing all four attempts, so that the error
log, `r` (their fifth call succeeds) and pause can be tried without a single `--sim-*` flag."""


@dataclass(frozen=True)
class RunPlan:
    """Everything about how to run, apart from the tasks; stored in the journal (no key)."""

    profile: ProviderProfile
    settings: EngineSettings
    sim: SimConfig | None = None
    prices: dict[str, Any] = field(default_factory=dict)
    """The user's price overrides (config `[prices]`)."""

    def price_for(self, model: str | None):
        return PriceTable.builtin(self.prices).lookup(model, self.profile.name)


@dataclass(frozen=True)
class RayOptions:
    """`--ray [ADDRESS]`: run the swarm's engines on Ray actors (None/"local": a local Ray)."""

    address: str | None = None
    actors: int | None = None
    """How many worker actors (default: one per alive node)."""


def _client_limits(settings: EngineSettings) -> dict[str, Any]:
    """What each of the run's clients is bound by: one attempt's time, one answer's size."""
    return {"attempt_timeout_s": settings.timeout_s, "max_answer_bytes": settings.max_answer_bytes}


def default_run_dir(job_name: str, root: Path = Path("runs")) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in job_name)[:60] or "job"
    path = root / f"{stamp}-{safe}"
    n = 1
    while path.exists():
        n += 1
        path = root / f"{stamp}-{safe}-{n}"
    return path


class SwarmSession:
    def __init__(
        self,
        run_dir: Path,
        journal: Journal,
        plan: RunPlan,
        tasks: list[Task],
        states: dict[int, TaskState],
        attempts_made: dict[int, int],
        job_name: str,
        swarm: SwarmSpec | None = None,
        template: TaskTemplate | None = None,
        ray: RayOptions | None = None,
        lock: RunDirLock | None = None,
        tools: ToolsSpec | None = None,
        judge: JudgeSpec | None = None,
        judge_profile: ProviderProfile | None = None,
    ) -> None:
        """`judge`: score a sample of the answers (`judge_profile`: its own endpoint; None: the run's)."""
        self.run_dir = run_dir
        self.journal = journal
        self.lock = lock
        self.output_error: str | None = None
        """Why results.jsonl / summary.json could not be written at the end, if they could not."""
        self.summary: dict[str, Any] | None = None
        """summary.json's content, once `run()` has ended."""
        self.currency = configured_currency(provider=plan.profile.name, prices=plan.prices)
        """The display currency of summary.json, chosen now: the same run exports the same anywhere."""
        self.plan = plan
        self.job_name = job_name
        self.sim: SimServer | None = None
        if plan.profile.is_simulator:
            self.sim = SimServer(plan.sim or DEMO_SIM).start(mode="thread")
            base_url = self.sim.base_url
        else:
            base_url = plan.profile.base_url
        self.client = ProviderClient(plan.profile, base_url, **_client_limits(plan.settings))
        model = (
            plan.profile.model
            or (tasks[0].body.get("model") if tasks else None)
            or (template.model if template else None)
        )
        price = plan.price_for(model)
        fallback_profile = plan.profile.fallback()
        self.fallback = None
        fallback_price = None
        if fallback_profile is not None:
            self.fallback = ProviderClient(fallback_profile, fallback_profile.base_url, **_client_limits(plan.settings))
            fallback_price = PriceTable.builtin(plan.prices).lookup(
                fallback_profile.model or model, fallback_profile.name.split("/")[0]
            )
        validator = json_validator if swarm and swarm.workers.json else None
        self.toolbox = Toolbox(tools) if tools is not None and tools.any else None
        """The run's tools: with them, every task is a multi-step agent."""
        self.engine: SwarmEngine | RayEngine
        if ray is not None:  # the same swarm, its engines on Ray actors (swarm_tui.distributed)
            from .distributed.driver import RayEngine

            self.engine = RayEngine(
                tasks,
                self.client,
                journal,
                plan.settings,
                profile=plan.profile,
                base_url=base_url,
                address=ray.address,
                actors=ray.actors,
                price=price,
                states=states,
                attempts_made=attempts_made,
                simulated=self.simulated,
                fallback_price=fallback_price,
                validator=validator,
            )
        else:
            self.engine = SwarmEngine(
                tasks,
                self.client,
                journal,
                plan.settings,
                price=price,
                states=states,
                attempts_made=attempts_made,
                simulated=self.simulated,
                fallback=self.fallback,
                fallback_price=fallback_price,
                validator=validator,
                trimmer=drop_memory if swarm and swarm.memory.rounds > 1 else None,
                toolbox=self.toolbox,
            )
        self.model = model
        self.template = template
        self.swarm = swarm
        self.pipeline = (
            SwarmPipeline(self.engine, journal, run_dir, swarm, template)
            if swarm and swarm.is_pipeline and template
            else None
        )
        self._control_task: asyncio.Task[None] | None = None
        self.judge_client: ProviderClient | None = None
        self.judge_sim: SimServer | None = None
        self.judge: Judge | None = None
        if judge is not None and isinstance(self.engine, SwarmEngine):
            self.judge = self._make_judge(judge, judge_profile)

    def _make_judge(self, spec: JudgeSpec, profile: ProviderProfile | None) -> Judge:
        """The judge, on the run's own endpoint (its admission and pacing) or on one of its own."""
        engine = self.engine
        assert isinstance(engine, SwarmEngine)
        admission = None
        if profile is not None and profile.name != self.plan.profile.name:
            base_url = profile.base_url
            if profile.is_simulator:  # the embedded simulator as the judge of a run elsewhere
                self.judge_sim = SimServer(self.plan.sim or DEMO_SIM).start(mode="thread")
                base_url = self.judge_sim.base_url
            self.judge_client = ProviderClient(profile, base_url, **_client_limits(self.plan.settings))
            admission = AdmissionController(JUDGE_CONCURRENCY, rate_limits=RateLimits(profile.rpm, profile.tpm))
        model = spec.model or (profile.model if profile is not None else None) or self.model or ""
        if self.judge_client is not None:
            table = PriceTable.builtin(self.plan.prices)
            engine.add_price(self.judge_client.name, table.lookup(model, self.judge_client.name))
        pipeline = self.pipeline
        multi_round = self.swarm is not None and self.swarm.memory.rounds > 1

        def flush() -> str:
            return (
                f"memory flushed ({pipeline.flush_memory()} rounds)" if pipeline is not None else "no memory to flush"
            )

        def pause() -> str:
            engine.pause()
            return "paused until resumed"

        def fail_over() -> str:
            return "failed over to the fallback" if engine.fail_over("quality drift") else "no fallback to fail over to"

        judge = Judge(
            engine,
            self.journal,
            spec,
            model=model,
            action=spec.action_for(multi_round),
            actions={"flush_memory": flush, "pause": pause, "failover": fail_over},
            round_of=(lambda: pipeline.round_number) if pipeline is not None else (lambda: 1),
            client=self.judge_client,
            admission=admission,
        )
        engine.subscribe(judge.observe)
        if pipeline is not None:
            pipeline.settle = judge.settle
            pipeline.flushed.append(judge.monitor.start_over)
        return judge

    def budget_note(self) -> str | None:
        """What the budget holds back for each call until it is answered (shown as the run starts):
        a budget is a ceiling, so a body without max_tokens reserves the model's whole maximum."""
        budget = self.plan.settings.budget_usd
        price = self.plan.price_for(self.model)
        if budget is None or price is None:
            return None
        tasks = self.engine.tasks
        body = tasks[min(tasks)].body if tasks else (self.template.body("", agent=1, total=1) if self.template else {})
        usage = worst_usage(body, price.max_output)
        if usage is None:
            return f"budget ${budget:.2f}: a call's answer has no bound (no max_tokens, no known maximum)"
        own = answer_ceiling(body) is not None
        ceiling = "its max_tokens" if own else f"{self.model}'s maximum output, no max_tokens in the body"
        return (
            f"budget ${budget:.2f} is a ceiling: each call holds up to ${price.cost(usage):.4f} until it is answered "
            f"({usage.completion:,} output tokens: {ceiling})"
        )

    @property
    def tasks(self) -> list[Task]:
        """Every task of the run so far, in order (a planned swarm has none until the planner answers)."""
        tasks = self.engine.tasks
        return [tasks[i] for i in sorted(tasks)]

    @property
    def simulated(self) -> bool:
        return self.plan.profile.is_simulator

    @property
    def has_history(self) -> bool:
        """Earlier sessions of this run did something (sent a call, submitted a batch)."""
        return self.journal.has_attempts() or bool(self.journal.open_batches())

    # ----------------------------------------------------------------- opening

    @classmethod
    def open_new(
        cls,
        job: Job,
        plan: RunPlan,
        run_dir: Path,
        *,
        ray: RayOptions | None = None,
        judge_profile: ProviderProfile | None = None,
    ) -> SwarmSession:
        """A new run in `run_dir` (new or empty; InputError otherwise), locked for this process."""
        tasks = job.tasks
        template = job.template
        if template is not None and plan.profile.model:  # later rounds and planned tasks ask for it too
            template = replace(template, model=plan.profile.model)
        created = prepare_new(run_dir)
        lock = RunDirLock(run_dir).acquire()
        meta = {
            "job": {"name": job.name, "source": job.source, "options": job.options},
            "plan": plan_to_meta(plan),
            "swarm": job.swarm.to_meta() if job.swarm else None,
            "template": asdict(template) if template else None,
            "tools": job.tools.to_meta() if job.tools else None,
            "judge": judge_to_meta(job.judge, judge_profile),
        }
        try:
            journal = Journal.create(run_dir, tasks, meta)
        except BaseException as exc:  # Ctrl-C, a full disk: no run was made, so no half-made directory stays
            lock.release()
            discard_new(run_dir, created)
            if isinstance(exc, OSError | sqlite3.Error) and not isinstance(exc, FileExistsError):
                path = run_dir / JOURNAL_NAME
                raise InputError.single(run_dir, "journal", describe_write_failure(exc, path)) from None
            raise
        try:
            journal.begin_session()
            return cls(
                run_dir,
                journal,
                plan,
                tasks,
                {},
                {},
                job.name,
                job.swarm,
                template,
                ray,
                lock,
                job.tools,
                job.judge,
                judge_profile,
            )
        except BaseException:
            lock.release()
            raise

    @classmethod
    def open_existing(
        cls,
        run_dir: Path,
        *,
        profile: ProviderProfile | None = None,
        settings: EngineSettings | None = None,
        retry_failed: bool = False,
        ray: RayOptions | None = None,
        sim: SimConfig | None = None,
    ) -> SwarmSession:
        """Resume the run in `run_dir`; RunDirBusy (exit 2) when another live process writes it.
        `sim`: the simulator's settings for this session, when the user changed them."""
        Journal.open(run_dir, readonly=True).close()  # no (whole) journal: say so before taking the lock
        lock = RunDirLock(run_dir).acquire()
        try:
            return cls._resume(run_dir, lock, profile, settings, retry_failed, ray, sim)
        except BaseException:
            lock.release()
            raise

    @classmethod
    def _resume(
        cls,
        run_dir: Path,
        lock: RunDirLock,
        profile: ProviderProfile | None,
        settings: EngineSettings | None,
        retry_failed: bool,
        ray: RayOptions | None,
        sim: SimConfig | None,
    ) -> SwarmSession:
        journal = Journal.open(run_dir)
        meta = journal.meta()
        stored = plan_from_meta(meta["plan"])
        plan = RunPlan(profile or stored.profile, settings or stored.settings, sim or stored.sim, stored.prices)
        try:
            journal.begin_session()  # the first write: a journal that cannot take one fails here, nothing sent
        except JournalWriteError as exc:
            journal.close()
            raise InputError.single(journal.path, "journal", f"{exc.cause}; resume writes the journal") from None
        discard_outputs(run_dir)  # this session's, or none: never the last session's looking current
        if profile is not None and profile != stored.profile:  # the run goes on with it (a later resume too)
            journal.set_meta("plan", plan_to_meta(replace(stored, profile=profile)))
        migrate(journal)  # a journal from before the event log gets one, rebuilt from its rows
        close_interrupted_run(journal)  # its last process was killed: its calls in flight were lost
        rows = journal.tasks()
        if retry_failed:
            failed = [r.index for r in rows if r.state is TaskState.FAILED]
            journal.requeue(failed, [TaskQueued(i, TaskState.FAILED) for i in failed])
            rows = journal.tasks()
        tasks = [Task(r.index, r.custom_id, r.body) for r in rows]
        if profile is not None and profile.model:
            tasks = [Task(t.index, t.custom_id, {**t.body, "model": profile.model}) for t in tasks]
            journal.replace_bodies(  # what is sent from now on is what the journal says is sent
                {r.index: {**r.body, "model": profile.model} for r in rows if r.body.get("model") != profile.model}
            )
        states = {r.index: r.state for r in rows}
        attempts = {r.index: r.attempts for r in rows}
        swarm = SwarmSpec.from_meta(meta["swarm"]) if meta.get("swarm") else None
        template = TaskTemplate(**meta["template"]) if meta.get("template") else None
        if template is not None and profile is not None and profile.model:
            template = replace(template, model=profile.model)
        tools = ToolsSpec.from_meta(meta["tools"]) if meta.get("tools") else None
        judge, judge_profile = judge_from_meta(meta.get("judge"))
        return cls(
            run_dir,
            journal,
            plan,
            tasks,
            states,
            attempts,
            meta["job"]["name"],
            swarm,
            template,
            ray,
            lock,
            tools,
            judge,
            judge_profile,
        )

    # ----------------------------------------------------------------- running

    async def run(self) -> RunFinished:
        """Run the engine to the end, serving attach commands meanwhile; then write the outputs."""
        if self.toolbox is not None:
            await self.toolbox.start()  # checked before the run opened (cli): a server that fails now says so
        self._control_task = asyncio.create_task(self._serve_control(), name="swarm-control")
        try:
            finished = await (self.pipeline.run() if self.pipeline else self.engine.run())
            if self.judge is not None:
                await self.judge.settle()  # the last answers' scores belong in summary.json
        except JournalWriteError:  # a planner's or aggregator's outcome could not be kept: the run stopped
            finished = self.engine.outcome()
        finally:
            self._control_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._control_task  # it writes the heartbeat: stopped before the export reads the journal
            # results.jsonl of 100,000 tasks takes seconds: written off the event loop (the screen stays live)
            self.summary = await asyncio.to_thread(self.finalize)
        return finished

    async def _serve_control(self) -> None:
        """Apply commands that `attach` (another process) put in the journal; beat a heartbeat;
        notice within a second that the journal was deleted or replaced under the run."""
        while True:
            self.journal.check_in_place()
            try:
                self.journal.heartbeat()  # who drives the run; what it does is in the log
                commands = self.journal.take_commands()
            except JournalWriteError:
                return  # the journal told the engine, which stopped the run
            for command, args in commands:
                self.apply_command(command, args)
            await asyncio.sleep(CONTROL_POLL_S)

    def apply_command(self, command: str, args: dict[str, Any]) -> None:
        engine = self.engine
        match command:
            case "pause":
                engine.pause()
            case "resume":
                engine.resume()
            case "abort":
                engine.abort("aborted from an attached view")
            case "stop":
                engine.stop_dispatch(str(args.get("reason") or "stopped from an attached view"))
            case "retry":
                engine.retry_failed(args.get("indices"))
            case "cancel":
                cancel_tasks = getattr(engine, "cancel_tasks", None)
                if cancel_tasks is not None:
                    cancel_tasks(args.get("indices") or [])
            case "concurrency":
                engine.set_concurrency(int(args["limit"]), "attached view")
            case "flush_memory":
                if self.pipeline is not None:
                    self.pipeline.flush_memory()

    def finalize(self) -> dict[str, Any]:
        """Write results.jsonl, errors.jsonl and summary.json from the journal (atomically).

        When they cannot be written (disk full, the directory gone) the summary is still
        returned and `output_error` says why: the journal keeps everything, and a resume (or
        the next finalize) writes them."""
        try:
            summary = write_outputs(
                self.run_dir,
                self.journal,
                self.model,
                self.plan.profile.name,
                self.simulated,
                deadlines=self._deadlines(),
                currency=self.currency,
                budget=self._budget(),
            )
            self.output_error = None
            return summary
        except OSError as exc:
            self.output_error = describe_write_failure(exc, Path(exc.filename or self.run_dir))
            return summarize(
                self.journal,
                model=self.model,
                provider=self.plan.profile.name,
                simulated=self.simulated,
                deadlines=self._deadlines(),
                currency=self.currency,
                budget=self._budget(),
            )

    def _budget(self) -> dict[str, Any] | None:
        """The budget's report: the engine's ledger (this session's peak) over the journal's spend."""
        ledger = getattr(self.engine, "ledger", None)  # a distributed engine splits its budget by shard
        report = ledger.report() if ledger is not None else None
        if report is None:
            budget = self.plan.settings.budget_usd
            return None if budget is None else BudgetReport(budget, self.journal.spent_usd(), 0.0, False).to_dict()
        return replace(report, spent_usd=self.journal.spent_usd()).to_dict()

    def _deadlines(self) -> dict[str, Any] | None:
        tail = getattr(self.engine, "tail", None)  # a distributed engine's deadlines live on its shards
        return tail.describe() if tail is not None else None

    async def aclose(self) -> None:
        if self.toolbox is not None:
            await self.toolbox.aclose()
        engine_close = getattr(self.engine, "aclose", None)  # a distributed engine's actors
        if engine_close is not None:
            await engine_close()
        await self.client.aclose()
        if self.fallback is not None:
            await self.fallback.aclose()
        if self.judge_client is not None:
            await self.judge_client.aclose()
        if self.judge_sim is not None:
            self.judge_sim.stop()
        if self.sim is not None:
            self.sim.stop()
        self.journal.close()
        if self.lock is not None:
            self.lock.release()


# --------------------------------------------------------------------------- plan <-> journal meta


def judge_to_meta(spec: JudgeSpec | None, profile: ProviderProfile | None) -> dict[str, Any] | None:
    """The judge as the journal keeps it (its profile without a key, as the run's)."""
    if spec is None:
        return None
    return {"spec": spec.to_meta(), "profile": asdict(profile) if profile is not None else None}


def judge_from_meta(data: dict[str, Any] | None) -> tuple[JudgeSpec | None, ProviderProfile | None]:
    if not data:
        return None, None
    profile = ProviderProfile(**data["profile"]) if data.get("profile") else None
    return JudgeSpec.from_meta(data["spec"]), profile


def plan_to_meta(plan: RunPlan) -> dict[str, Any]:
    return {
        "profile": {"name": plan.profile.name, **plan.profile.to_toml()},
        "settings": asdict(plan.settings),
        "sim": asdict(plan.sim) if plan.sim else None,
        "prices": plan.prices,
        "saved_at": time.time(),
    }


def plan_from_meta(meta: dict[str, Any]) -> RunPlan:
    profile_data = dict(meta["profile"])
    profile = ProviderProfile(name=profile_data.pop("name"), **profile_data)
    sim = SimConfig().patched(meta["sim"]) if meta.get("sim") else None  # JSON gave lists for its tuples
    return RunPlan(profile, EngineSettings(**meta["settings"]), sim, meta.get("prices") or {})
