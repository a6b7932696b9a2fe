"""What is checked before a run directory is made or a call is sent: the key, the budget's bound,
the engine's capabilities, the tools, the lane, the judge (exit 2 naming file and field)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from dataclasses import replace
from pathlib import Path

from swarm_tui.config import Config
from swarm_tui.core.errors import InputError
from swarm_tui.core.lanes import LIVE
from swarm_tui.core.ports import Capability, missing
from swarm_tui.core.tiers import PRIORITY
from swarm_tui.engine import EngineSettings
from swarm_tui.engine.ledger import answer_ceiling
from swarm_tui.jobs import Job
from swarm_tui.jobs.judge_spec import SELF as JUDGE_SELF
from swarm_tui.jobs.judge_spec import JudgeSpec, read_rubric
from swarm_tui.providers.client import preflight
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.run.plan import RunPlan
from swarm_tui.tools import Toolbox, ToolsSpec


def check_budget(plan: RunPlan, job: Job, model: str | None, config: Config) -> None:
    """A budget is a ceiling: every call must have a worst case the run can hold against it, so
    the model's price must be known, and a body without max_tokens needs the model's maximum
    output from the price table (exit 2, nothing sent, naming what to set)."""
    if plan.settings.guards.budget_usd is None:
        return
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


def check_key(profile: ProviderProfile) -> None:
    """Fail before anything is written or sent when the key's env var (or a header's) is missing, or
    the route cannot be used (a proxy the backend cannot speak, a CA bundle that cannot be read)."""
    if profile.is_simulator:
        preflight(profile, "http://127.0.0.1")
    else:
        preflight(profile, profile.base_url)
    fallback = profile.fallback()
    if fallback is not None:
        preflight(fallback, fallback.base_url)


def ray_options(args: argparse.Namespace):
    """`--ray [ADDRESS]`: checked before anything is written or sent (exit 2 when it cannot work)."""
    if args.ray is None:
        if args.ray_actors:
            raise InputError.single("--ray-actors", "ray", "--ray-actors needs --ray")
        return None
    from swarm_tui.distributed import require_ray
    from swarm_tui.run.plan import RayOptions

    require_ray()
    return RayOptions(address=args.ray, actors=args.ray_actors)


def check_tools(tools: ToolsSpec | None) -> None:
    """Start the job's tools once and stop them (exit 2, nothing sent, when one does not start)."""
    if tools is None or not tools.any:
        return

    servers = f"{len(tools.mcp)} MCP server{'s' if len(tools.mcp) != 1 else ''}" if tools.mcp else "its Python tools"
    print(f"swarm-tui: starting the job's tools to check them ({servers}) ...", file=sys.stderr, flush=True)

    async def probe() -> None:
        toolbox = Toolbox(tools)
        await toolbox.start()
        await toolbox.aclose()

    asyncio.run(probe())


def judge_options(
    args: argparse.Namespace, job: Job, profile: ProviderProfile, config: Config
) -> tuple[Job, ProviderProfile | None]:
    """The job's `[judge]` with the `--judge*` options over it, and the judge's own endpoint
    (None: the run's); exit 2 (nothing sent) when it cannot work."""
    options = {
        "model": args.judge_model,
        "rate": args.judge_rate,
        "action": args.judge_action,
        "drop": args.judge_drop,
    }
    given = {k: v for k, v in options.items() if v is not None}
    if args.judge_rubric is not None:
        given["rubric"] = read_rubric(args.judge_rubric, rubric_problem(args.judge_rubric))
    if args.judge is None and job.judge is None:
        if given:
            flag = "--judge-" + next(iter(given)).replace("_", "-")
            raise InputError.single(flag, "judge", f"{flag} needs --judge (or a [judge] table in the job)")
        return job, None
    spec = replace(job.judge or JudgeSpec(), **given)
    if args.judge is not None:
        spec = replace(spec, endpoint=None if args.judge == JUDGE_SELF else args.judge)
    where = str(args.judge and "--judge" or job.source)
    multi_round = job.swarm is not None and job.swarm.memory.rounds > 1
    action = spec.action_for(multi_round)
    if action == "flush_memory" and not multi_round:
        raise InputError.single(where, "judge.action", "flush_memory needs a multi-round swarm ([memory] rounds > 1)")
    if action == "failover" and profile.fallback() is None:
        raise InputError.single(where, "judge.action", "failover needs a fallback (--fallback-base-url)")
    judge_profile = None
    if spec.endpoint is not None and spec.endpoint != profile.name:
        if "://" in spec.endpoint:
            judge_profile = ProviderProfile(name="judge", base_url=spec.endpoint.rstrip("/"), model=spec.model)
        else:
            judge_profile = config.profile(spec.endpoint)
        check_key(judge_profile)
    return replace(job, judge=spec), judge_profile


def rubric_problem(path: Path):
    def report(message: str) -> None:
        raise InputError.single(path, "judge.rubric", message)

    return report


def check_engine(
    ray,
    tools: ToolsSpec | None,
    settings: EngineSettings,
    *,
    judged: bool,
    judge_where: str,
    routed: bool = False,
    escalated: bool = False,
) -> None:
    """The engine that will run the swarm must be able to do everything the run asks for: what
    it cannot do is refused (exit 2, naming it, nothing sent), never silently dropped."""
    if ray is None:
        return
    from swarm_tui.distributed import CAPABILITIES

    asked = {
        Capability.TOOLS: tools.source if tools is not None and tools.any else None,
        Capability.BATCH: "--lane" if settings.lanes.lane != LIVE else None,
        Capability.JUDGE: judge_where if judged else None,
        Capability.ROUTES: "--provider" if routed else None,
        Capability.DEADLINE: "--deadline" if settings.lanes.deadline_at is not None else None,
        Capability.ESCALATE: "--escalate" if escalated else None,
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


def check_lane(settings: EngineSettings, tools: ToolsSpec | None) -> None:
    """The batch lane carries one-call tasks of one engine (exit 2 otherwise, nothing sent)."""
    if settings.lanes.lane == LIVE:
        return
    if tools is not None and tools.any:
        raise InputError.single(
            tools.source,
            "lane",
            f"multi-step agents run live only (--lane {settings.lanes.lane} needs a job without tools)",
        )


def tui_available() -> bool:
    try:
        import swarm_tui.ui.app  # noqa: F401
    except ImportError:
        return False
    return sys.stdout.isatty() or bool(os.environ.get("SWARM_TUI_FORCE_TUI"))


def check_theme_option(args: argparse.Namespace) -> None:
    """A --theme that cannot load fails before a run directory is made (exit 2)."""
    if args.theme and not args.headless and tui_available():
        from swarm_tui.ui.themes import check_theme

        check_theme(args.theme)


def check_route(plan: RunPlan, model: str | None) -> None:
    """`--max-price` must leave the route an endpoint to send to (exit 2, nothing sent)."""
    route = plan.route
    if route is None or route.max_price is None:
        return
    profiles = [plan.profile, *route.others]
    prices = {p.name: plan.price_for(p.model or model, p.name) for p in profiles}
    if any(price is not None and price.output <= route.max_price for price in prices.values()):
        return
    said = ", ".join(f"{name} {f'${price.output:g}' if price else 'no known price'}" for name, price in prices.items())
    raise InputError.single(
        "--max-price",
        "route",
        f"no endpoint of the route is priced at or under ${route.max_price:g} per 1M output tokens ({said})",
    )
