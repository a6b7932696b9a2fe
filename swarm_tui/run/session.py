"""A run directory being worked on: journal + endpoint + engine, for a new run or a resume.

A session opens a plan that is already decided and checked (`run.resolve`, `run.preflight`):
`open_new(job, plan, run_dir)` makes a new run, `open_existing(stored, plan)` goes on with a
stored run (`run.stored`: its lock, journal and meta, held once). Both front ends (headless and
the TUI) then drive it the same way: `await session.run()`, after which `finalize()` writes
`results.jsonl`, `errors.jsonl` and `summary.json` from the journal, and `aclose()`.
The session also serves the journal's control queue, so `attach` in another terminal, `ctl`, a
script or the MCP server can pause, resume, retry, cancel, retune and abort this run; each command
is answered in the queue with what it did, and its effect is in the event log as a key's is. Its
heartbeat carries the run's pulse (`journal.control.Pulse`): counts, what the unfinished tasks wait
on, the failures by class, phase, limit, cost, rates and ETA, so that `ctl status` reads one row.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from swarm_tui.cache import CacheMode, CacheSettings, ResponseCache, default_cache_dir
from swarm_tui.config import configured_currency
from swarm_tui.core.errors import InputError, JournalWriteError
from swarm_tui.core.events import RunFinished, TaskQueued
from swarm_tui.core.notes import CacheUnavailable
from swarm_tui.core.ports import Capability
from swarm_tui.core.task import Task
from swarm_tui.core.tiers import PRIORITY
from swarm_tui.engine import AnswerRules, Doors, EngineSettings, Resumed, TaskState, build_engine
from swarm_tui.engine.answers import ESCALATED_PREFIX, AnswerChecks
from swarm_tui.engine.ledger import BudgetReport, answer_ceiling, worst_usage
from swarm_tui.engine.ports import Engine
from swarm_tui.engine.routing.endpoints import RouteSpec
from swarm_tui.engine.spawns import EngineSpawns
from swarm_tui.jobs import Job
from swarm_tui.journal import JOURNAL_NAME, Journal
from swarm_tui.journal.control import Command, Pulse
from swarm_tui.judge.judge import Judge, JudgedEngine
from swarm_tui.providers.client import ProviderClient
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.providers.routes import RoutePlan, open_clients
from swarm_tui.records import (
    BudgetFigures,
    JobRecord,
    JudgeRecord,
    RunMeta,
    RunPlan,
    Summary,
    TailDeadlines,
    Traces,
)
from swarm_tui.run.directory import RunDirLock, discard_new, prepare_new
from swarm_tui.run.judge import JudgeEndpoint, make_judge
from swarm_tui.run.outputs import OutputFacts, discard_outputs, end_outputs
from swarm_tui.run.plan import DEMO_SIM, RayOptions, RunContents
from swarm_tui.run.stored import StoredRun
from swarm_tui.sim import SimConfig, SimServer
from swarm_tui.swarm.pipeline import SwarmPipeline, drop_memory
from swarm_tui.tools import Toolbox
from swarm_tui.tools.spec import DEFAULT_MAX_STEPS
from swarm_tui.tools.swarm_tools import Ended, SwarmTools
from swarm_tui.util.files import describe_write_failure
from swarm_tui.view.failures import FailedClasses
from swarm_tui.view.follower import close_interrupted_run
from swarm_tui.view.run_view import RunView

if TYPE_CHECKING:
    from swarm_tui.otel.live import LiveTracer

__all__ = ["DEMO_SIM", "RayOptions", "RunContents", "RunPlan", "SwarmSession"]

CONTROL_POLL_S = 0.5


class SwarmSession:
    """A run being worked on by this process: its journal (and the directory's lock), its endpoint
    clients, its engine (here or on Ray), its pipeline and judge; see the module."""

    def __init__(
        self,
        run_dir: Path,
        journal: Journal,
        plan: RunPlan,
        contents: RunContents,
        ray: RayOptions | None = None,
        lock: RunDirLock | None = None,
    ) -> None:
        self.run_dir = run_dir
        self.journal = journal
        self.lock = lock
        self.output_error: str | None = None
        """Why results.jsonl / summary.json could not be written at the end, if they could not."""
        self.outputs_deferred: str | None = None
        """Why the outputs were left for `swarm-tui export` at the user's stop, and how to get them."""
        self.user_stopped = False
        """The user asked the run to stop (a signal, an abort): `stop_by_user`."""
        self.summary: Summary | None = None
        """summary.json's content, once `run()` has ended."""
        self.currency = configured_currency(provider=plan.profile.name, prices=plan.prices)
        """The display currency of summary.json, chosen now: the same run exports the same anywhere."""
        self.plan = plan
        self.job_name = contents.job_name
        self.model = plan.model
        """The run's model, as the plan decided it (`RunPlan.deciding_model`)."""
        self.template = contents.template
        self.swarm = contents.swarm
        self.sim: SimServer | None = None
        if plan.profile.is_simulator:
            self.sim = SimServer(plan.sim or DEMO_SIM).start(mode="thread")
        self.client, self.fallback, self.route_clients = open_clients(plan, self.base_url)
        self.escalation = self._escalation_client()
        """`--escalate`: the endpoint a task goes to when its answers could not be used."""
        self.answer = contents.answer
        self.response_cache = self._open_cache()
        self.tools = contents.tools if contents.tools is not None and contents.tools.any else None
        """The run's tools: with them, every task is a multi-step agent (on Ray they run on the actors)."""
        self.toolbox = Toolbox(self.tools) if self.tools is not None and ray is None else None
        self.swarm_tools = self._swarm_tools(contents) if ray is None else None
        """An orchestrator job's tools: the job's with the swarm tools beside them (None: no orchestrator)."""
        self.engine = self._make_engine(contents, ray)
        self.pipeline = (
            SwarmPipeline(self.engine, journal, run_dir, self.swarm, self.template)
            if self.swarm and self.swarm.is_pipeline and self.template
            else None
        )
        self._control_task: asyncio.Task[None] | None = None
        self.judge_endpoint = JudgeEndpoint()
        self.judge: Judge | None = None
        if contents.judge is not None and Capability.JUDGE in self.engine.capabilities:  # else the preflight refused it
            self.judge = self._make_judge(contents.judge)
        self.tracer: LiveTracer | None = None  # --otel: the run's spans exported as it goes (`trace`)
        engine = self.engine
        self.view = RunView(states=engine.states, stats=engine.stats, screen=False)
        """The run's phase, limit and pace as its events tell them (the heartbeat's pulse)."""
        self.view.figures.limit = engine.admission.limit
        self.view.figures.ceiling = engine.adaptive.ceiling if engine.adaptive is not None else None
        self.failures = FailedClasses(journal.queries.failed_classes())
        """The failed tasks by the class of their last error, every session's."""
        engine.subscribe(self.view.observe)
        engine.subscribe(self.failures.observe)

    def _escalation_client(self) -> ProviderClient | None:
        """The escalation endpoint's client, named `escalate:<profile>` (its attempts say so)."""
        profile = self.plan.escalate
        if profile is None:
            return None
        base_url = self.base_url if profile.is_simulator and self.sim is not None else profile.base_url
        named = replace(profile, name=ESCALATED_PREFIX + profile.name)
        return ProviderClient(named, base_url, **self.plan.client_limits())

    def _open_cache(self) -> ResponseCache | None:
        """The response cache of a `--cache` run (None without: no file is even opened). A file
        that cannot be used is said once (stderr and the journal) and the run goes on uncached."""
        settings = self.plan.cache
        mode = CacheMode(settings.mode)
        if mode is CacheMode.OFF:
            return None
        cache = ResponseCache(
            Path(settings.dir) if settings.dir else default_cache_dir(),
            mode,
            ttl_s=settings.ttl_s,
            max_bytes=settings.max_bytes,
            on_problem=self._cache_problem,
        )
        if self.sim is not None:  # the embedded simulator's port is new every run: its answers are the simulator's
            cache.aliases[self.client.base_url] = "embedded-simulator"
        return cache

    def _cache_problem(self, message: str) -> None:
        print(f"swarm-tui: {message}", file=sys.stderr)
        with contextlib.suppress(JournalWriteError):
            self.journal.writer.append([CacheUnavailable(message, writes_only="without writing" in message)])

    @property
    def base_url(self) -> str:
        """Where the run's calls go: the profile's endpoint, or the embedded simulator."""
        return self.sim.base_url if self.sim is not None else self.plan.profile.base_url

    def _swarm_tools(self, contents: RunContents) -> SwarmTools | None:
        """The tools of an orchestrator's agents: the job's and the swarm tools, knowing what earlier
        sessions spawned (a spawn run again after a crash finds its agents and spawns none)."""
        spec = contents.orchestrator
        if spec is None:
            return None
        return SwarmTools(
            spec,
            self.toolbox,
            max_steps=contents.tools.max_steps if contents.tools is not None else DEFAULT_MAX_STEPS,
            context=self.template.context if self.template is not None else "",
            spawned=self.journal.queries.spawned(),
        )

    def _spawn_outcome(self, index: int) -> Ended | None:
        """How a spawned agent ended, as the journal keeps it: its answer's text, or its error."""
        result = self.journal.queries.result_of(index)
        if result is None:
            return None
        if result["ok"]:
            return Ended("succeeded", _content_of(result.get("response")))
        error = result.get("error") or {}
        said = f"{error.get('type', 'error')} {error.get('status') or ''}".strip()
        return Ended("failed", f"{said}: {error.get('message', '')}")

    def _make_engine(self, contents: RunContents, ray: RayOptions | None) -> Engine:
        """The run's engine: in this process, or its shards on Ray actors (swarm_tui.distributed)."""
        plan = self.plan
        fallback_profile = plan.profile.fallback()
        fallback_price = (
            plan.price_for(fallback_profile.model or self.model, fallback_profile.name.split("/")[0])
            if fallback_profile is not None
            else None
        )
        swarm = contents.swarm
        resumed = Resumed(contents.states, contents.attempts_made)
        escalation = self.escalation
        checks = AnswerChecks(contents.answer, plan.settings.answers, escalation=escalation is not None)
        price = plan.price_for(self.model)
        if ray is not None:
            from swarm_tui.distributed.driver import RayEngine

            return RayEngine(
                contents.tasks,
                self.journal.records,
                plan.settings,
                Doors(self.client, price, fallback_price=fallback_price),
                resumed=resumed,
                answers=AnswerRules(checks),
                simulated=self.simulated,
                profile=plan.profile,
                base_url=self.base_url,
                address=ray.address,
                actors=ray.actors,
                response_cache=self.response_cache,
                tools=self.tools,
            )
        engine = build_engine(
            contents.tasks,
            self.journal.records,
            plan.settings,
            Doors(
                self.client,
                price,
                self.fallback,
                fallback_price,
                route_spec(plan, self.route_clients, self.model),
                escalation,
                plan.price_for(escalation.profile.model or self.model, plan.escalate.name)
                if escalation is not None and plan.escalate is not None
                else None,
            ),
            resumed=resumed,
            answers=AnswerRules(checks, drop_memory if swarm and swarm.memory.rounds > 1 else None),
            toolbox=self.swarm_tools or self.toolbox,
            response_cache=self.response_cache,
            simulated=self.simulated,
        )
        if self.swarm_tools is not None:
            self.swarm_tools.attach(EngineSpawns(engine, self._spawn_outcome))
        return engine

    def _make_judge(self, judge: JudgeRecord) -> Judge:
        engine = cast("JudgedEngine", self.engine)  # an engine that declares the judge capability
        self.judge_endpoint = JudgeEndpoint.open(judge.profile, self.plan)
        return make_judge(
            engine,
            self.journal,
            judge.spec,
            self.judge_endpoint,
            self.plan,
            model=judge.model(self.model) or "",
            pipeline=self.pipeline,
            multi_round=self.swarm is not None and self.swarm.memory.rounds > 1,
        )

    def budget_note(self) -> str | None:
        """What the budget holds back for each call until it is answered (shown as the run starts):
        a budget is a ceiling, so a body without max_tokens reserves the model's whole maximum."""
        budget = self.plan.settings.guards.budget_usd
        price = self.plan.price_for(self.model)
        if price is not None and self.plan.profile.service_tier == PRIORITY:  # reserved at its premium
            price = price.for_tier(PRIORITY)
        if budget is None or price is None:
            return None
        first = next(iter(self.engine.tasks.values()), None)  # in index order: no walk over a million
        body = first.body if first else (self.template.body("", agent=1, total=1) if self.template else {})
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
    def tasks(self) -> Mapping[int, Task]:
        """Every task of the run so far by index, in order (a planned swarm has none until the planner
        answers); a body is read from the journal when its task is looked up."""
        return self.engine.tasks

    @property
    def simulated(self) -> bool:
        return self.plan.profile.is_simulator

    @property
    def has_history(self) -> bool:
        """Earlier sessions of this run did something (sent a call, submitted a batch)."""
        return self.journal.queries.has_attempts() or bool(self.journal.history.open_batches())

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
        """A new run in `run_dir` (new or empty; InputError otherwise), locked for this process. The
        plan's model is the one it decided; a plan made by hand (a test, the replay) has it decided
        here, by the same rule (`RunPlan.deciding_model`)."""
        tasks = job.tasks
        template = job.template
        if plan.model is None:
            first = tasks[0] if tasks else None
            plan = plan.deciding_model(first.body.get("model") if first is not None else None, template)
        if template is not None and plan.profile.model:  # later rounds and planned tasks ask for it too
            template = replace(template, model=plan.profile.model)
        created = prepare_new(run_dir)
        lock = RunDirLock(run_dir).acquire()
        judge = JudgeRecord(job.judge, judge_profile) if job.judge is not None else None
        table = job.table.to_meta() if job.table is not None else None
        meta = RunMeta(
            JobRecord(job.name, job.source, job.options, table),
            plan,
            job.swarm,
            template,
            job.tools,
            judge,
            job.answer,
            orchestrator=job.orchestrator,
        )
        try:
            written, rows = job.table.beside_tasks() if job.table is not None else (tasks, None)  # a table: one read
            journal = Journal.create(run_dir, written, meta.to_meta(), rows=rows)
        except BaseException as exc:  # Ctrl-C, a full disk: no run was made, so no half-made directory stays
            lock.release()
            discard_new(run_dir, created)
            if isinstance(exc, OSError | sqlite3.Error) and not isinstance(exc, FileExistsError):
                path = run_dir / JOURNAL_NAME
                raise InputError.single(run_dir, "journal", describe_write_failure(exc, path)) from None
            raise
        try:
            journal.begin_session()
            contents = RunContents(
                job.name,
                journal.task_table(),  # the bodies stay in the journal (a million would take a gigabyte)
                swarm=job.swarm,
                template=template,
                tools=job.tools,
                judge=judge,
                orchestrator=job.orchestrator,
                answer=job.answer,
            )
            return cls(run_dir, journal, plan, contents, ray, lock)
        except BaseException:
            lock.release()
            raise

    @classmethod
    def open_existing(
        cls, stored: StoredRun, plan: RunPlan, *, retry_failed: bool = False, ray: RayOptions | None = None
    ) -> SwarmSession:
        """The stored run going on with `plan` (its stored plan with what the resume changes,
        resolved and checked): the journal's new session begins here, its first write (an older
        journal is brought to this version's log then, once). `retry_failed`: the tasks that
        failed finally are queued again. On success the session owns the stored run's journal and
        lock; the caller releases them if this fails (`StoredRun.released_on_error`)."""
        journal, run_dir = stored.journal, stored.run_dir
        try:
            journal.begin_session()  # the first write: a journal that cannot take one fails here, nothing sent
        except JournalWriteError as exc:
            raise InputError.single(journal.path, "journal", f"{exc.cause}; resume writes the journal") from None
        discard_outputs(run_dir)  # this session's, or none: never the last session's looking current
        moved = stored.moved(plan)
        if moved is not None:  # a later resume goes on where this one moved the run
            journal.writer.set_meta("plan", moved.to_meta())
        close_interrupted_run(journal)  # its last process was killed: its calls in flight were lost
        if retry_failed:
            failed = [i for i, state in journal.queries.states().items() if state is TaskState.FAILED]
            journal.records.requeue(failed, [TaskQueued(i, TaskState.FAILED) for i in failed])
        meta = stored.meta
        template = meta.template
        if plan.profile != meta.plan.profile and plan.profile.model:
            journal.replace_model(plan.profile.model)  # what is sent from now on is what the journal says is sent
            if template is not None:  # later rounds and planned tasks ask for it too
                template = replace(template, model=plan.profile.model)
        states, attempts = journal.queries.task_progress()
        contents = RunContents(
            meta.job.name,
            journal.task_table(),
            states,
            attempts,
            meta.swarm,
            template,
            meta.tools,
            meta.judge,
            orchestrator=meta.orchestrator,
            answer=meta.answer,
        )
        return cls(run_dir, journal, plan, contents, ray, stored.lock)

    @classmethod
    def reopen(
        cls,
        run_dir: Path,
        *,
        profile: ProviderProfile | None = None,
        settings: EngineSettings | None = None,
        cache: CacheSettings | None = None,
        retry_failed: bool = False,
        ray: RayOptions | None = None,
        sim: SimConfig | None = None,
        route: RoutePlan | None = None,
        escalate: ProviderProfile | None = None,
    ) -> SwarmSession:
        """Resume the run in `run_dir` with the changes named here rather than asked on a command
        line (tests, benchmarks): the same opening as `resume` (`StoredRun.plan_with`), without its
        preflight. `route`: with a new `profile`, the route it heads (without one the run's own goes on)."""
        stored = StoredRun.open(run_dir)
        with stored.released_on_error():
            plan = stored.plan_with(
                profile=profile, settings=settings, cache=cache, sim=sim, route=route, escalate=escalate
            )
            return cls.open_existing(stored, plan, retry_failed=retry_failed, ray=ray)

    def trace(self, *, content: bool = False, endpoint: str | None = None) -> None:
        """Export the run's spans while it goes (`--otel`, `[otel]`; InputError, exit 2, without the extra)."""
        from swarm_tui.otel.live import LiveTracer

        self.tracer = LiveTracer.subscribed(self.engine, self.journal, content=content, endpoint=endpoint)

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
            with contextlib.suppress(JournalWriteError):
                self.journal.control.heartbeat(self.pulse())  # its last pulse: the run ended, no command is taken
            if self.tracer is not None:  # the last spans sent (or counted as dropped) before the summary says so
                await asyncio.to_thread(self.tracer.close)
            # results.jsonl of 100,000 tasks takes seconds: written off the event loop (the screen stays live),
            # and left for `swarm-tui export` when the user stopped a big run (`outputs.end_outputs`)
            self.user_stopped = self.user_stopped or self.engine.outcome().aborted
            self.summary = await asyncio.to_thread(self.finalize)
        return finished

    async def _serve_control(self) -> None:
        """Apply commands other processes (`attach`, `ctl`, the MCP server) put in the journal and
        answer each with what it did; beat a heartbeat with the run's pulse; notice within a
        second that the journal was deleted or replaced under the run."""
        control = self.journal.control
        while True:
            self.journal.writer.check_in_place()
            try:
                control.heartbeat(self.pulse())  # who drives the run, and how it goes
                commands = control.take_commands()
                for command in commands:
                    control.answer(command.id, self.apply_command(command))
                if commands:  # what they did, said at once: a status read after the answer sees it
                    control.heartbeat(self.pulse())
            except JournalWriteError:
                return  # the journal told the engine, which stopped the run
            await asyncio.sleep(CONTROL_POLL_S)

    def pulse(self) -> Pulse:
        """The run now, as the heartbeat says it (`journal.control.Pulse`): O(1) reads of the
        engine's board and figures, whatever the run's size."""
        engine, view = self.engine, self.view
        board, stats, figures = engine.board, engine.stats, view.figures
        counts = {state.value: board.count(state) for state in TaskState}
        live, lines = board.live_tasks, board.batch_lines
        waiting = {
            "in_flight": live,
            "in_tools": max(0, board.count(TaskState.RUNNING) - live - lines),
            "in_batch": lines,
            "backoff": board.count(TaskState.RETRYING),
            "queued": board.count(TaskState.QUEUED),
            "held": board.count(TaskState.CANCELLED),
        }
        requests_per_s, tokens_per_s = stats.rates()
        eta = view.pace.eta_s()
        return Pulse(
            provider=self.plan.profile.name,
            model=self.model,
            phase=view.phases.phase,
            phase_detail=view.phases.detail,
            paused=engine.paused,
            stopping=engine.outcome().stop_reason if engine.running else None,
            limit=engine.admission.limit,
            ceiling=engine.adaptive.ceiling if engine.adaptive is not None else figures.ceiling,
            total=len(engine.tasks),
            counts=counts,
            waiting=waiting,
            failed_by_class=self.failures.counts(),
            gate_s=round(engine.admission.gate_remaining_s, 1),
            cost_usd=round(engine.ledger.spent_usd, 6) if stats.cost_known else None,
            requests_per_s=round(requests_per_s, 2),
            tokens_per_s=round(tokens_per_s, 1),
            eta_s=round(eta, 1) if eta is not None else None,
        )

    def stop_by_user(self, reason: str | None = None) -> None:
        """The user asked the run to stop (SIGTERM, SIGHUP, Ctrl-C): a big run's outputs are left
        for later (`outputs.end_outputs`); with a `reason`, dispatch stops gently (calls in flight finish)."""
        self.user_stopped = True
        if reason is not None:
            self.engine.stop_dispatch(reason)

    def apply_command(self, command: Command) -> dict[str, Any]:
        """A command another process put in the control queue, applied as the key that does the
        same would be (its effect journaled as the key's); what it did, for the sender. `by` in
        its arguments names the sender (an attached view, `ctl`, the MCP server)."""
        args = command.args
        by = str(args.get("by") or "attached view")  # a limit's reason, as the log says it
        source = "an attached view" if by == "attached view" else by
        indices = args.get("indices")
        match command.name:
            case "pause":
                return self.pause(now=bool(args.get("now")))
            case "resume":
                self.engine.resume()
                return {"paused": self.engine.paused}
            case "abort":
                self.engine.abort(f"aborted from {source}")
                return {"aborted": True}
            case "stop":
                self.engine.stop_dispatch(str(args.get("reason") or f"stopped from {source}"))
                return {"stopping": True}
            case "retry":
                errored = args.get("errored")
                return self.retry(list(indices) if indices is not None else None, errored=errored)
            case "cancel":
                return self.cancel(list(indices or []))
            case "concurrency":
                return {"limit": self.engine.set_concurrency(int(args["limit"]), by)}
            case "flush_memory":
                if self.pipeline is None:
                    return {"flushed": None, "why": "this run keeps no rolling memory"}
                return {"flushed": self.pipeline.flush_memory()}
        return {"error": f"unknown command {command.name!r}"}

    # ----------------------------------------------------------------- steering (the control queue's, the API's)

    def pause(self, *, now: bool = False) -> dict[str, Any]:
        """Send nothing new; `now`: hold the calls in flight too (an engine that cannot hold them
        lets them finish, and says so)."""
        engine = self.engine
        can_hold = Capability.HOLD_CALLS in engine.capabilities
        held = engine.pause(now=now and can_hold)
        result: dict[str, Any] = {"paused": engine.paused, "held": len(held)}
        if now and not can_hold:
            result["why"] = f"this engine cannot hold the calls in flight ({Capability.HOLD_CALLS}): they finish"
        return result

    def retry(self, indices: list[int] | None = None, *, errored: str | None = None) -> dict[str, Any]:
        """Queue failed tasks again: these (the user's cancelled ones too), those whose last error
        is of class `errored`, or every failed one."""
        if errored is not None:
            indices = self.failures.of_class(errored)
            if not indices:
                return {"queued": 0, "why": f"no task failed with {errored}"}
        queued = self.engine.retry_failed(indices)
        return {"queued": len(queued)}

    def cancel(self, indices: list[int]) -> dict[str, Any]:
        """Stop these tasks now (each waits, cancelled, until retried by name or the run resumed)."""
        if Capability.CANCEL not in self.engine.capabilities:
            return {"cancelled": 0, "why": f"this engine cannot do {Capability.CANCEL}"}
        return {"cancelled": len(self.engine.cancel_tasks(indices))}

    def finalize(self) -> Summary:
        """Write results.jsonl, errors.jsonl and summary.json from the journal (atomically), or
        leave them for `swarm-tui export` at a big stop the user asked for with work left
        (`outputs.end_outputs`); the summary either way. `output_error` says why they could not be
        written, `outputs_deferred` why they were left and how to get them."""
        user_stop = self.user_stopped and self.engine.outcome().cancelled > 0
        ended = end_outputs(self.run_dir, self.journal, self._output_facts(), user_stop=user_stop)
        self.output_error, self.outputs_deferred = ended.error, ended.deferred
        return ended.summary

    def _output_facts(self) -> OutputFacts:
        report = self.tracer.report if self.tracer is not None else None
        tail = self.engine.tail  # None: a distributed engine's deadlines live on its shards
        return OutputFacts(
            self.plan,
            self.currency,
            budget=self._budget(),
            deadlines=TailDeadlines.from_json(tail.describe()) if tail is not None else None,
            traces=Traces.from_json(report.to_dict()) if report is not None else None,
        )

    def _budget(self) -> BudgetFigures | None:
        """The budget's report: the engine's ledger (this session's peak) over the journal's spend."""
        ledger = self.engine.ledger  # on Ray it holds no budget: the shards' allowances do
        report = ledger.report() if ledger is not None else None
        if report is None:
            budget = self.plan.settings.guards.budget_usd
            if budget is None:
                return None
            report = BudgetReport(budget, self.journal.queries.spent_usd(), 0.0, False)
        else:
            report = replace(report, spent_usd=self.journal.queries.spent_usd())
        return BudgetFigures.from_json(report.to_dict())

    async def aclose(self) -> None:
        if self.tracer is not None and self.tracer.report is None:  # a session that never ran: its threads end
            await asyncio.to_thread(self.tracer.close)
        if self.toolbox is not None:
            await self.toolbox.aclose()
        await self.engine.aclose()  # a distributed engine's actors
        for client in (self.client, self.fallback, self.escalation, *self.route_clients):
            if client is not None:
                await client.aclose()
        await self.judge_endpoint.aclose()
        if self.sim is not None:
            self.sim.stop()
        if self.response_cache is not None:
            self.response_cache.close()
        self.journal.close()
        if self.lock is not None:
            self.lock.release()


def _content_of(response: Any) -> str:
    """The text of a chat completion's answer (a provider's list of parts as JSON)."""
    try:
        content = response["choices"][0]["message"].get("content")
    except (KeyError, IndexError, TypeError, AttributeError):
        return ""
    if content is None:
        return ""
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


def route_spec(plan: RunPlan, others: list[ProviderClient], model: str | None) -> RouteSpec | None:
    """The engine's side of the plan's route: each other endpoint's client with its price."""
    if plan.route is None:
        return None
    priced = [(c, plan.price_for(c.profile.model or model, c.profile.name)) for c in others]
    return RouteSpec(priced, plan.route.strategy, plan.route.max_price)
