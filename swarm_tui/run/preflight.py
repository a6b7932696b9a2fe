"""What is checked of a resolved plan before a run directory is made or a call is sent, every
problem gathered in one list: the keys (the endpoint's, a route's, the fallback's, the judge's),
the judge's action, the budget's bound, a route's price ceiling, Ray and what the engine on it
can do, the lane, the traces' extra, and the tools (started once and stopped, last: the slowest).

`preflight` returns the problems, each naming its file or flag, its field and what to do; the
caller refuses the run with all of them at once (`refuse`: InputError, exit 2). A front end adds
its own checks (the console's theme) through `also`, so one refusal says everything.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterable

from swarm_tui.config import Config
from swarm_tui.core.errors import InputError, Problem
from swarm_tui.core.lanes import LIVE
from swarm_tui.core.ports import Capability, missing
from swarm_tui.core.tiers import PRIORITY
from swarm_tui.engine import EngineSettings
from swarm_tui.engine.ledger import answer_ceiling
from swarm_tui.jobs import Job
from swarm_tui.jobs.judge_spec import JudgeSpec
from swarm_tui.providers.client import preflight as client_preflight
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.records import RunPlan
from swarm_tui.run.resolve import SessionPlan, Tracing
from swarm_tui.tools import Toolbox, ToolsSpec
from swarm_tui.tools.orchestrator_spec import OrchestratorSpec
from swarm_tui.tools.swarm_tools import SWARM_TOOL_NAMES

Check = Callable[[], None]
"""One check: it raises InputError naming what is wrong."""


def preflight(plan: SessionPlan, config: Config, *, also: Iterable[Check] = ()) -> list[Problem]:
    """Every problem of `plan`, none sent or written: a new run's budget and route are checked
    against its job (a resume's were when it was made, and its tasks are in the journal)."""
    run, job = plan.run, plan.job
    checks: list[Check] = [
        *also,
        lambda: check_keys(run, plan.judge_profile),
        lambda: check_judge(plan.judge, run.profile, job, plan.judge_source),
    ]
    if job is not None:
        checks += [lambda: check_budget(run, job, config), lambda: check_route(run)]
    if plan.ray is not None:
        checks.append(check_ray)
    checks += [
        lambda: check_engine(plan),
        lambda: check_lane(run.settings, plan.tools, plan.orchestrator),
        lambda: check_tracing(plan.tracing),
        lambda: check_tools(plan.tools, plan.orchestrator),
    ]
    problems: list[Problem] = []
    for check in checks:
        try:
            check()
        except InputError as exc:
            problems.extend(exc.problems)
    return problems


def refuse(problems: list[Problem]) -> None:
    """Nothing goes ahead with a problem: InputError (exit 2) saying every one."""
    if problems:
        raise InputError(problems)


def check_keys(plan: RunPlan, judge_profile: ProviderProfile | None) -> None:
    """The key (and headers, proxy, CA bundle) of every endpoint the run will call."""
    problems: list[Problem] = []
    for profile in (plan.profile, *(plan.route.others if plan.route else ()), judge_profile, plan.escalate):
        if profile is not None:
            try:
                check_key(profile)
            except InputError as exc:
                problems.extend(exc.problems)
    refuse(problems)


def check_key(profile: ProviderProfile) -> None:
    """Fail before anything is written or sent when the key's env var (or a header's) is missing, or
    the route cannot be used (a proxy the backend cannot speak, a CA bundle that cannot be read)."""
    if profile.is_simulator:
        client_preflight(profile, "http://127.0.0.1")
    else:
        client_preflight(profile, profile.base_url)
    fallback = profile.fallback()
    if fallback is not None:
        client_preflight(fallback, fallback.base_url)


def check_judge(spec: JudgeSpec | None, profile: ProviderProfile, job: Job | None, where: str) -> None:
    """The judge's action must be one the run can take (a resume's was checked when it was made)."""
    if spec is None or job is None:
        return
    multi_round = job.swarm is not None and job.swarm.memory.rounds > 1
    action = spec.action_for(multi_round)
    if action == "flush_memory" and not multi_round:
        raise InputError.single(where, "judge.action", "flush_memory needs a multi-round swarm ([memory] rounds > 1)")
    if action == "failover" and profile.fallback() is None:
        raise InputError.single(where, "judge.action", "failover needs a fallback (--fallback-base-url)")


def check_budget(plan: RunPlan, job: Job, config: Config) -> None:
    """A budget is a ceiling: every call must have a worst case the run can hold against it, so
    the model's price must be known, and a body without max_tokens needs the model's maximum
    output from the price table (exit 2, nothing sent, naming what to set)."""
    if plan.settings.guards.budget_usd is None:
        return
    model = plan.model
    price = plan.price_for(model)
    if price is None:
        raise InputError.single(
            "--budget",
            "budget",
            f"no price is known for model {model!r} on provider {plan.profile.name!r}; "
            f'add [prices."{plan.profile.name}/{model}"] with input, cached_input and output to {config.path}',
        )
    if plan.profile.service_tier == PRIORITY and price.for_tier(PRIORITY) is None:
        raise InputError.single(
            "--budget",
            "budget",
            f"--service-tier priority: no priority price is known for model {model!r} on provider "
            f"{plan.profile.name!r}, so a call's worst case cannot be held against the budget; add "
            f'priority = {{ input = ..., output = ... }} to [prices."{plan.profile.name}/{model}"] in {config.path}',
        )
    if price.max_output is not None:
        return
    template = job.template.request if job.template is not None else None
    unbounded = next((task for task in job.tasks if answer_ceiling(task.body) is None), None)
    if unbounded is not None or (template is not None and answer_ceiling(template) is None):
        which = f"task {unbounded.custom_id!r}" if unbounded is not None else "the job's requests"
        raise InputError.single(
            "--budget",
            "budget",
            f"{which} sets no max_tokens and the maximum output of {model!r} is not known, so the worst case "
            f"of a call cannot be held against the budget: set max_tokens in the job (request.max_tokens, or "
            f'each body\'s), or add max_output = N to [prices."{plan.profile.name}/{model}"] in {config.path}',
        )


def check_route(plan: RunPlan) -> None:
    """`--max-price` must leave the route an endpoint to send to (exit 2, nothing sent)."""
    route = plan.route
    if route is None or route.max_price is None:
        return
    profiles = [plan.profile, *route.others]
    prices = {p.name: plan.price_for(p.model or plan.model, p.name) for p in profiles}
    if any(price is not None and price.output <= route.max_price for price in prices.values()):
        return
    said = ", ".join(f"{name} {f'${price.output:g}' if price else 'no known price'}" for name, price in prices.items())
    raise InputError.single(
        "--max-price",
        "route",
        f"no endpoint of the route is priced at or under ${route.max_price:g} per 1M output tokens ({said})",
    )


def check_engine(plan: SessionPlan) -> None:
    """The engine that will run the swarm must be able to do everything the run asks for: what
    it cannot do is refused (exit 2, naming it, nothing sent), never silently dropped."""
    if plan.ray is None:
        return
    settings, tools = plan.run.settings, plan.tools
    judged = plan.judge is not None
    from swarm_tui.distributed import CAPABILITIES

    asked = {
        Capability.TOOLS: tools.source if tools is not None and tools.any else None,
        Capability.BATCH: "--lane" if settings.lanes.lane != LIVE else None,
        Capability.JUDGE: plan.judge_source if judged else None,
        Capability.ROUTES: "--provider" if plan.run.route is not None else None,
        Capability.DEADLINE: "--deadline" if settings.lanes.deadline_at is not None else None,
        Capability.SPAWN: plan.orchestrator.source or "--orchestrate" if plan.orchestrator is not None else None,
        Capability.ESCALATE: "--escalate" if plan.run.escalate is not None else None,
    }
    lacking = missing(CAPABILITIES, [capability for capability, where in asked.items() if where is not None])
    if lacking:
        first = lacking[0]
        raise InputError.single(
            asked[first] or "--ray", "ray", f"{first.value} does not run on Ray yet: drop --ray to run it here"
        )
    if settings.guards.budget_usd is None:
        return
    if judged:  # the shards' allowances hold neither the judge's calls nor the driver's batches
        raise InputError.single(
            "--budget",
            "ray",
            "the judge with --budget does not run on Ray yet (the judge's calls are not held against the "
            "shards' parts of the budget): drop --ray, --budget or the judge",
        )
    if settings.lanes.lane != LIVE:
        raise InputError.single(
            "--budget",
            "ray",
            f"the batch lane (--lane {settings.lanes.lane}) with --budget does not run on Ray yet (its batches are "
            "not held against the shards' parts of the budget): drop --ray, --budget or --lane",
        )


def check_ray() -> None:
    """`--ray`: the extra must be installed (exit 2 naming it otherwise)."""
    from swarm_tui.distributed import require_ray

    require_ray()


def check_lane(settings: EngineSettings, tools: ToolsSpec | None, orchestrator: OrchestratorSpec | None = None) -> None:
    """The batch lane carries one-call tasks of one engine (exit 2 otherwise, nothing sent)."""
    if settings.lanes.lane == LIVE:
        return
    if orchestrator is not None:
        raise InputError.single(
            orchestrator.source or "--orchestrate",
            "lane",
            f"an orchestrator and its sub-agents run live only (--lane {settings.lanes.lane} needs a job without one)",
        )
    if tools is not None and tools.any:
        raise InputError.single(
            tools.source,
            "lane",
            f"multi-step agents run live only (--lane {settings.lanes.lane} needs a job without tools)",
        )


def check_tracing(tracing: Tracing | None) -> None:
    """The live export asked for (`--otel`, `[otel]`) needs the otel extra (exit 2 naming it)."""
    if tracing is not None:
        from swarm_tui.otel.sdk import require_sdk

        require_sdk("--otel-content" if tracing.content else "--otel")


def check_tools(tools: ToolsSpec | None, orchestrator: OrchestratorSpec | None = None) -> None:
    """Start the job's tools once and stop them (exit 2, nothing sent, when one does not start, or,
    beside an orchestrator's swarm tools, when one takes a swarm tool's name)."""
    if tools is None or not tools.any:
        return

    servers = f"{len(tools.mcp)} MCP server{'s' if len(tools.mcp) != 1 else ''}" if tools.mcp else "its Python tools"
    print(f"swarm-tui: starting the job's tools to check them ({servers}) ...", file=sys.stderr, flush=True)

    async def probe() -> list[str]:
        toolbox = Toolbox(tools)
        await toolbox.start()
        names = [schema["function"]["name"] for schema in toolbox.openai_tools()]
        await toolbox.aclose()
        return names

    taken = [name for name in asyncio.run(probe()) if name in SWARM_TOOL_NAMES]
    if orchestrator is not None and taken:
        raise InputError.single(
            tools.source,
            "tools",
            f"{', '.join(taken)}: the name of an orchestrator's own tool; name the job's otherwise",
        )
