"""What a session runs, as the journal keeps it: the plan (endpoint, settings, simulator,
prices; never a key) and the run's contents (its tasks, where each stands, the job's parts).

A new run stores both in the journal's meta; `resume` reads them back, so the same run goes
on the same way on any machine (a changed profile or model is written back before a call)."""

from __future__ import annotations

import time
from collections.abc import MutableMapping
from dataclasses import asdict, dataclass, field
from typing import Any

from swarm_tui.cache import CacheSettings
from swarm_tui.core.checks import AnswerSpec
from swarm_tui.core.events import TaskState
from swarm_tui.core.task import Task
from swarm_tui.engine.settings import EngineSettings
from swarm_tui.jobs import TaskTemplate
from swarm_tui.jobs.judge_spec import JudgeSpec
from swarm_tui.jobs.swarm_spec import SwarmSpec
from swarm_tui.pricing import PriceTable
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.providers.routes import RoutePlan
from swarm_tui.sim import SimConfig
from swarm_tui.tools import ToolsSpec

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
    route: RoutePlan | None = None
    """The endpoints after `profile` and how calls are spread over them (`--provider a,b --route`)."""
    cache: CacheSettings = CacheSettings()
    """The response cache's use (`--cache`; off by default)."""
    escalate: ProviderProfile | None = None
    """`--escalate PROFILE`: where a task goes when its answers could not be used (None: nowhere)."""

    def price_for(self, model: str | None, provider: str | None = None):
        return PriceTable.builtin(self.prices).lookup(model, provider or self.profile.name)

    def client_limits(self) -> dict[str, Any]:
        """What each of the run's clients is bound by: one attempt's time, one answer's size."""
        return {
            "attempt_timeout_s": self.settings.calls.timeout_s,
            "max_answer_bytes": self.settings.calls.max_answer_bytes,
        }


@dataclass(frozen=True)
class RayOptions:
    """`--ray [ADDRESS]`: run the swarm's engines on Ray actors (None/"local": a local Ray)."""

    address: str | None = None
    actors: int | None = None
    """How many worker actors (default: one per alive node)."""


@dataclass(frozen=True)
class RunContents:
    """What a session works on: the tasks so far, where each stands, and the job's parts."""

    job_name: str
    tasks: MutableMapping[int, Task]
    """By index: the journal's table (`journal.task_table`, bodies read when asked for)."""
    states: dict[int, TaskState] = field(default_factory=dict)
    attempts_made: dict[int, int] = field(default_factory=dict)
    swarm: SwarmSpec | None = None
    template: TaskTemplate | None = None
    tools: ToolsSpec | None = None
    judge: JudgeSpec | None = None
    judge_profile: ProviderProfile | None = None
    """The judge's own endpoint (None: the run's)."""
    answer: AnswerSpec | None = None
    """The job's answer checks (`[answer]`, `--schema`) beyond the bodies' own formats."""

    def model(self, plan: RunPlan) -> str | None:
        """The model the run asks for: the profile's, else the first task's, else the template's."""
        first = next(iter(self.tasks.values())).body.get("model") if self.tasks else None
        return plan.profile.model or first or (self.template.model if self.template else None)


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
        "settings": plan.settings.to_meta(),
        "cache": asdict(plan.cache),
        "sim": asdict(plan.sim) if plan.sim else None,
        "prices": plan.prices,
        "route": plan.route.to_meta() if plan.route is not None else None,
        "escalate": {"name": plan.escalate.name, **plan.escalate.to_toml()} if plan.escalate is not None else None,
        "saved_at": time.time(),
    }


def plan_from_meta(meta: dict[str, Any]) -> RunPlan:
    profile_data = dict(meta["profile"])
    profile = ProviderProfile(name=profile_data.pop("name"), **profile_data)
    sim = SimConfig().patched(meta["sim"]) if meta.get("sim") else None  # JSON gave lists for its tuples
    route = RoutePlan.from_meta(meta.get("route"))
    escalate = dict(meta["escalate"]) if meta.get("escalate") else None
    return RunPlan(
        profile,
        EngineSettings.from_meta(meta["settings"]),
        sim,
        meta.get("prices") or {},
        route,
        cache_from_meta(meta),
        ProviderProfile(name=escalate.pop("name"), **escalate) if escalate is not None else None,
    )


def cache_from_meta(meta: dict[str, Any]) -> CacheSettings:
    """The plan's cache settings: their own table, or (a run made before it) the `cache*` fields of
    its flat engine settings."""
    if meta.get("cache"):
        return CacheSettings(**meta["cache"])
    old = meta.get("settings") or {}
    names = {"cache": "mode", "cache_dir": "dir", "cache_ttl_s": "ttl_s", "cache_max_bytes": "max_bytes"}
    return CacheSettings(**{new: old[name] for name, new in names.items() if name in old})
