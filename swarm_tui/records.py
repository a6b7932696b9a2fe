"""A run's records as they are kept on disk, each a dataclass with its codec here and nowhere else:
the journal's meta (`RunMeta`: the job, the plan, the swarm, the template, the tools, the judge)
and summary.json (`Summary`).

Every module that reads or writes them (the session, the outputs, the resume, `export`, the
attached view, the estimate, the traces) goes through these types, so a key is spelt in one
place and an older journal's meta is read in one place: what a journal of any version kept
decodes here, and only here. A part of its own, below the run and the traces (`otel`), so that
both read the same records; it knows the stores and the settings it decodes, nothing above them.

The run's model is decided here too (`RunPlan.deciding_model`): the profile's, else the one the
first task names, else the template's. It is not stored: the journal keeps what it is decided
from, so a new run, a resume, `export` and the attached view all reach the same model.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from types import UnionType
from typing import Any, ClassVar, Self, Union, get_args, get_origin, get_type_hints

from swarm_tui.cache import CacheSettings
from swarm_tui.core.checks import AnswerSpec
from swarm_tui.engine.settings import EngineSettings
from swarm_tui.jobs import TaskTemplate
from swarm_tui.jobs.judge_spec import JudgeSpec
from swarm_tui.jobs.swarm_spec import SwarmSpec
from swarm_tui.journal import Journal
from swarm_tui.pricing import Price, PriceTable
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.providers.routes import RoutePlan
from swarm_tui.sim import SimConfig
from swarm_tui.tools import ToolsSpec
from swarm_tui.tools.orchestrator_spec import OrchestratorSpec

# ---------------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class RunPlan:
    """How a run is carried out, apart from its tasks: the endpoint (and a route's others), the
    engine's settings, the embedded simulator's, the user's prices, the response cache, and the
    model it asks for. Kept in the journal's meta (never a key), so a resume goes on the same way."""

    profile: ProviderProfile
    settings: EngineSettings
    sim: SimConfig | None = None
    prices: dict[str, Any] = field(default_factory=dict)
    """The user's price overrides (config `[prices]`)."""
    route: RoutePlan | None = None
    """The endpoints after `profile` and how calls are spread over them (`--provider a,b --route`)."""
    cache: CacheSettings = CacheSettings()
    """The response cache's use (`--cache`; off by default)."""
    model: str | None = None
    """The model the run asks for (`deciding_model`); None until it is decided, or when nothing names
    one. Not stored: the profile and the tasks it is decided from are."""
    escalate: ProviderProfile | None = None
    """`--escalate PROFILE`: where a task goes when its answers could not be used (None: nowhere)."""

    def deciding_model(self, first_task_model: str | None, template: TaskTemplate | None) -> RunPlan:
        """This plan with the run's model decided, by the one rule every reader of a run follows: the
        profile's (`--model` is in it), else the model the first task's body names, else the
        template's (a planned swarm has no task until its planner answers)."""
        model = self.profile.model or first_task_model or (template.model if template is not None else None)
        return replace(self, model=model)

    def price_for(self, model: str | None, provider: str | None = None) -> Price | None:
        return PriceTable.builtin(self.prices).lookup(model, provider or self.profile.name)

    def client_limits(self) -> dict[str, Any]:
        """What each of the run's clients is bound by: one attempt's time, one answer's size."""
        return {
            "attempt_timeout_s": self.settings.calls.timeout_s,
            "max_answer_bytes": self.settings.calls.max_answer_bytes,
        }

    def to_meta(self) -> dict[str, Any]:
        return {
            "profile": {"name": self.profile.name, **self.profile.to_toml()},
            "settings": self.settings.to_meta(),
            "cache": asdict(self.cache),
            "sim": asdict(self.sim) if self.sim else None,
            "prices": self.prices,
            "route": self.route.to_meta() if self.route is not None else None,
            "escalate": {"name": self.escalate.name, **self.escalate.to_toml()} if self.escalate is not None else None,
            "saved_at": time.time(),
        }

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> RunPlan:
        """The plan a journal of any version kept (its model left undecided: `RunMeta.read` decides it)."""
        profile_data = dict(meta["profile"])
        profile = ProviderProfile(name=profile_data.pop("name"), **profile_data)
        sim = SimConfig().patched(meta["sim"]) if meta.get("sim") else None  # JSON gave lists for its tuples
        escalate = dict(meta["escalate"]) if meta.get("escalate") else None
        return cls(
            profile,
            EngineSettings.from_meta(meta["settings"]),
            sim,
            meta.get("prices") or {},
            RoutePlan.from_meta(meta.get("route")),
            _cache_from_meta(meta),
            escalate=ProviderProfile(name=escalate.pop("name"), **escalate) if escalate is not None else None,
        )


def _cache_from_meta(meta: Mapping[str, Any]) -> CacheSettings:
    """The plan's cache settings: their own table, or (a run made before it) the `cache*` fields of
    its flat engine settings."""
    if meta.get("cache"):
        return CacheSettings(**meta["cache"])
    old = meta.get("settings") or {}
    names = {"cache": "mode", "cache_dir": "dir", "cache_ttl_s": "ttl_s", "cache_max_bytes": "max_bytes"}
    return CacheSettings(**{new: old[name] for name, new in names.items() if name in old})


# ---------------------------------------------------------------------------------- the meta


@dataclass(frozen=True)
class JobRecord:
    """The job a run was made from: its name, the file it came from, its (now always empty) options,
    and for a table job the table's kind and columns (`jobs.tables`: what an export gives back)."""

    name: str
    source: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    table: dict[str, Any] | None = None

    def to_meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": self.name, "source": self.source, "options": self.options}
        if self.table is not None:
            meta["table"] = self.table
        return meta

    @classmethod
    def from_meta(cls, data: Mapping[str, Any]) -> JobRecord:
        table = data.get("table")
        return cls(
            str(data.get("name") or ""),
            str(data.get("source") or ""),
            dict(data.get("options") or {}),
            dict(table) if table else None,
        )


@dataclass(frozen=True)
class JudgeRecord:
    """The run's judge: its spec, and its own endpoint (None: the run's), kept without a key as the run's is."""

    spec: JudgeSpec
    profile: ProviderProfile | None = None

    def model(self, run_model: str | None) -> str | None:
        """The model the judge asks for: its own (`--judge-model`), else its endpoint's, else the run's."""
        return self.spec.model or (self.profile.model if self.profile is not None else None) or run_model

    def to_meta(self) -> dict[str, Any]:
        return {"spec": self.spec.to_meta(), "profile": asdict(self.profile) if self.profile is not None else None}

    @classmethod
    def from_meta(cls, data: Mapping[str, Any] | None) -> JudgeRecord | None:
        if not data:
            return None
        profile = ProviderProfile(**data["profile"]) if data.get("profile") else None
        return cls(JudgeSpec.from_meta(data["spec"]), profile)


@dataclass(frozen=True)
class RunMeta:
    """What a run's journal keeps besides its tasks and its log: the job it was made from, its plan,
    and the job's parts a later session needs without the job file (its swarm, request template,
    tools and judge). Written once when the run is created (the plan again when a resume moves it
    to another endpoint)."""

    job: JobRecord
    plan: RunPlan
    swarm: SwarmSpec | None = None
    template: TaskTemplate | None = None
    tools: ToolsSpec | None = None
    judge: JudgeRecord | None = None
    answer: AnswerSpec | None = None
    """The job's answer checks (`[answer]`, `--schema FILE`): a resumed run checks the same way."""
    created_at: float | None = None
    """When the journal was made (the journal writes it, with its schema): with the job's name, what
    identifies the run among all runs (its traces' ids)."""
    orchestrator: OrchestratorSpec | None = None
    """An orchestrator job's limits and prompts (its tasks spawn sub-agents); None: none."""

    def to_meta(self) -> dict[str, Any]:
        """The journal's meta keys this record owns (the journal adds its own: schema, created_at...)."""
        meta = {
            "job": self.job.to_meta(),
            "plan": self.plan.to_meta(),
            "swarm": self.swarm.to_meta() if self.swarm else None,
            "template": asdict(self.template) if self.template else None,
            "tools": self.tools.to_meta() if self.tools else None,
            "judge": self.judge.to_meta() if self.judge else None,
            "answer": self.answer.to_meta() if self.answer else None,
        }
        if self.orchestrator is not None:  # a key of its own, only in the runs that have one
            meta["orchestrator"] = self.orchestrator.to_meta()
        return meta

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any], first_task_model: str | None = None) -> RunMeta:
        """The record a journal's meta holds, of any version; `first_task_model`: the model the
        run's first task names (the journal's), from which the plan's model is decided."""
        template = TaskTemplate(**meta["template"]) if meta.get("template") else None
        return cls(
            JobRecord.from_meta(meta.get("job") or {}),
            RunPlan.from_meta(meta["plan"]).deciding_model(first_task_model, template),
            SwarmSpec.from_meta(meta["swarm"]) if meta.get("swarm") else None,
            template,
            ToolsSpec.from_meta(meta["tools"]) if meta.get("tools") else None,
            JudgeRecord.from_meta(meta.get("judge")),
            AnswerSpec.from_meta(meta.get("answer")),
            meta.get("created_at"),
            OrchestratorSpec.from_meta(meta["orchestrator"]) if meta.get("orchestrator") else None,
        )

    @classmethod
    def read(cls, journal: Journal) -> RunMeta:
        """The run's record, read from its journal once (its model decided from its first task)."""
        return cls.from_meta(journal.queries.meta(), journal.queries.first_model())


# ---------------------------------------------------------------------------------- summary.json


class JsonRecord:
    """A part of summary.json as a dataclass: its fields are its keys, in the file's order. Nested
    records, lists and maps of them decode by the fields' annotations; a key an older file lacks
    takes the field's default. Nothing is converted on the way, so a file read and written again
    is the same file."""

    def to_json(self) -> dict[str, Any]:
        return {f.name: _encode(getattr(self, f.name)) for f in fields(self)}  # type: ignore[arg-type]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        if not isinstance(data, Mapping):
            raise TypeError(f"{cls.__name__}: an object expected, not {type(data).__name__}")
        hints = get_type_hints(cls)
        given = {f.name: _decode(hints[f.name], data[f.name]) for f in fields(cls) if f.name in data}  # type: ignore[arg-type]
        return cls(**given)

    @classmethod
    def json_keys(cls) -> tuple[str, ...]:
        """The keys this part writes, in order (docs/reference/summary.md documents each)."""
        return tuple(f.name for f in fields(cls))  # type: ignore[arg-type]


def _encode(value: Any) -> Any:
    if isinstance(value, JsonRecord):
        return value.to_json()
    if isinstance(value, list):
        return [_encode(item) for item in value]
    if isinstance(value, dict):
        return {key: _encode(item) for key, item in value.items()}
    return value


def _decode(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, UnionType):
        kinds = [arg for arg in args if arg is not type(None)]
        return _decode(kinds[0], value) if len(kinds) == 1 else value
    if origin is list:
        return [_decode(args[0], item) for item in value]
    if origin is dict:
        return {key: _decode(args[1], item) for key, item in value.items()}
    if isinstance(hint, type) and issubclass(hint, JsonRecord):
        return hint.from_json(value)
    return value


@dataclass(frozen=True)
class LatencyMs(JsonRecord):
    """The live answers' latency, ms (a batch line or a cache replay is no live call)."""

    p50: float | None = None
    p95: float | None = None
    p99: float | None = None
    mean: float | None = None


@dataclass(frozen=True)
class TokenCounts(JsonRecord):
    """Tokens every attempt that reported usage billed."""

    prompt: int = 0
    completion: int = 0
    cached: int = 0
    reasoning: int = 0


@dataclass(frozen=True)
class RequestCounts(JsonRecord):
    sent: int = 0
    retried: int = 0
    rate_limited: int = 0
    server_errors: int = 0
    timeouts: int = 0


@dataclass(frozen=True)
class Failover(JsonRecord):
    """One switch of endpoint (to the fallback, or back)."""

    at: float
    to: str
    reason: str
    from_primary: bool


@dataclass(frozen=True)
class AutopilotPlan(JsonRecord):
    """One of the autopilot's plans (`--deadline`), as it made it."""

    at: float
    live: int
    batch: int
    finish_at: float | None
    cost_usd: float | None
    feasible: bool
    reason: str


@dataclass(frozen=True)
class DeadlineOutcome(JsonRecord):
    """Whether the run ended by its `--deadline`."""

    at: float
    ended_at: float | None
    met: bool


@dataclass(frozen=True)
class Autopilot(JsonRecord):
    """A deadline run's plans and its deadline (two keys of summary.json's top level)."""

    plans: list[AutopilotPlan]
    deadline: DeadlineOutcome


@dataclass(frozen=True)
class EndpointFigures(JsonRecord):
    """What one endpoint was sent and answered (a batch endpoint and the cache are no door)."""

    requests: int
    answered: int
    rate_limited: int
    errors: int
    p50_ms: float | None
    p95_ms: float | None
    cost_usd: float


@dataclass(frozen=True)
class ModelPace(JsonRecord):
    """How fast one endpoint's model answered, and the straggler deadline that follows."""

    answers: int
    tokens_per_s: float | None
    overhead_s: float | None
    longest_answer_tokens: int | None
    straggler_s: float | None


@dataclass(frozen=True)
class TailDeadlines(JsonRecord):
    """The engine's tail deadlines as the run ended (a run on Ray keeps them on its shards)."""

    hard_timeout_s: float
    straggler_factor: float | None
    straggler_s: float | None
    straggler_rule: str
    typical_max_tokens: int | None
    by_model: dict[str, ModelPace]
    first_token_s: float | None
    hedge_s: float | None
    hedge_rule: str = ""
    """The backup rule, in words (a guess sends a backup, never cuts)."""


@dataclass(frozen=True)
class Deadlines(JsonRecord):
    """summary.json's `deadlines`: the tail deadlines' figures, and the attempts abandoned past them."""

    tail: TailDeadlines | None = None
    abandoned: int = 0

    def to_json(self) -> dict[str, Any]:
        return {**(self.tail.to_json() if self.tail is not None else {}), "abandoned": self.abandoned}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        if not isinstance(data, Mapping):
            raise TypeError(f"{cls.__name__}: an object expected, not {type(data).__name__}")
        tail = TailDeadlines.from_json(data) if "hard_timeout_s" in data else None
        return cls(tail, data.get("abandoned", 0))

    @classmethod
    def json_keys(cls) -> tuple[str, ...]:
        return (*TailDeadlines.json_keys(), "abandoned")


@dataclass(frozen=True)
class Stopped(JsonRecord):
    """Why dispatch stopped while tasks were left: a refusal, no connection (its cause and
    endpoint), the budget, the error rate, a suspension past `--max-suspend`."""

    at: float
    reason: str


@dataclass(frozen=True)
class Suspension(JsonRecord):
    """One wait for the provider to serve the account again (`engine.pacing.suspension`)."""

    at: float
    kind: str
    """`quota` or `retry_after`."""
    reason: str
    suspended_s: float | None = None
    """How long it held; None: the run stopped suspended."""


@dataclass(frozen=True)
class Percentiles(JsonRecord):
    """One figure of an endpoint's streamed calls, over those calls."""

    p50: float | None = None
    p95: float | None = None


@dataclass(frozen=True)
class StreamFigures(JsonRecord):
    """How one endpoint's streamed calls flowed."""

    calls: int
    ttft_ms: Percentiles
    tokens_per_s: Percentiles
    gap_ms: Percentiles
    """The mean time between two chunks of a call."""


@dataclass(frozen=True)
class BudgetFigures(JsonRecord):
    """Whether the budget held, and how near the run came to it."""

    usd: float
    spent_usd: float
    peak_committed_usd: float
    held: bool
    used_share: float | None
    stopped_dispatch: bool


@dataclass(frozen=True)
class AgentTotals(JsonRecord):
    """Multi-step agents: their model calls, tool calls, and the critical path."""

    steps: int
    tool_calls: int
    tool_errors: int
    critical_path: int


@dataclass(frozen=True)
class Orchestration(JsonRecord):
    """An orchestrator's run: the agents it (and they) spawned, by level, and the critical path."""

    spawned: int
    spawns: int
    levels: list[int]
    critical_path_calls: int
    critical_path_s: float


@dataclass(frozen=True)
class RoundQuality(JsonRecord):
    judged: int
    mean: float


@dataclass(frozen=True)
class Drift(JsonRecord):
    """A drift of the judge's rolling score below its baseline, and what was done about it."""

    at: float
    rolling: float
    baseline: float
    action: str
    detail: str
    round: int


@dataclass(frozen=True)
class Quality(JsonRecord):
    """The judge's figures: what was judged, by round, the drifts acted on, and its own cost."""

    judged: int
    mean: float | None
    p10: float | None
    by_round: dict[str, RoundQuality]
    drifts: list[Drift]
    judge_errors: int
    judge_cost_usd: float


@dataclass(frozen=True)
class CacheTotals(JsonRecord):
    """Answers replayed from the response cache (sent nothing, cost nothing) and what they saved."""

    hits: int
    saved_usd: float
    unpriced_hits: int


@dataclass(frozen=True)
class AnswerTotals(JsonRecord):
    """What the answer checks did (`engine.answers`): answers kept, the unusable ones by class, what
    followed them, and the cost on each side of an escalation."""

    valid: int
    unusable: dict[str, int]
    failed: dict[str, int]
    reasked: int
    more_room: int
    escalated: int
    cost_usd: dict[str, float]


@dataclass(frozen=True)
class Traces(JsonRecord):
    """What the live OpenTelemetry export delivered (`otel.report.TraceReport`)."""

    trace_id: str
    endpoint: str
    spans: int
    exported: int
    dropped: int


@dataclass(frozen=True)
class Batch(JsonRecord):
    """One provider batch of the batch lane."""

    batch_id: str
    input_file_id: str | None
    status: str
    requests: int
    submitted_at: float | None
    ended_at: float | None
    output_file_id: str | None
    error_file_id: str | None


@dataclass(frozen=True)
class EndpointCost(JsonRecord):
    """What one endpoint's attempts billed, and the price row they were billed at."""

    attempts: int
    cost_usd: float
    prompt: int
    cached: int
    cache_write: int
    completion: int
    price: dict[str, Any] | None
    """The price row (`pricing.Price.to_dict`), None when none applies."""


@dataclass(frozen=True)
class CurrencyAmount(JsonRecord):
    """The run's cost in the display currency chosen when it opened."""

    code: str
    rate: float
    symbol: str
    basis: str
    amount: float | None


@dataclass(frozen=True)
class CostBreakdown(JsonRecord):
    """Where the money went: by token kind, endpoint, lane and tier (each split adds up to the cost)."""

    input_usd: float
    cached_input_usd: float
    cache_write_usd: float
    output_usd: float
    reasoning_usd: float
    cached_savings_usd: float
    overhead_usd: float
    unpriced_attempts: int
    by_endpoint: dict[str, EndpointCost]
    by_lane: dict[str, float]
    by_tier: dict[str, float]
    at_default_tier_usd: float
    service_tier: str
    currency: CurrencyAmount


@dataclass(frozen=True)
class SpendFigures(JsonRecord):
    """The cost fields that read every attempt (four keys of summary.json's top level): left out
    of the summary of a stop whose outputs are left for later."""

    cost_per_min_usd: float | None
    cost_projected_usd: float | None
    cost_display: str
    cost_breakdown: CostBreakdown


@dataclass(frozen=True)
class Summary(JsonRecord):
    """summary.json: where a run stands and what it cost, written from its journal when it (or its
    resume) ends, or by `swarm-tui export`. The sections after `deadlines` are there only when the
    run used what they describe; `autopilot` and `spend` are groups of top-level keys."""

    total: int
    succeeded: int
    failed: int
    unfinished: int = 0
    makespan_s: float | None = None
    latency_ms: LatencyMs = field(default_factory=LatencyMs)
    tokens: TokenCounts = field(default_factory=TokenCounts)
    cost_usd: float | None = None
    cost_estimated_usd: float = 0.0
    cost_note: str | None = None
    truncated: int = 0
    requests: RequestCounts = field(default_factory=RequestCounts)
    provider: str = ""
    model: str | None = None
    simulated: bool = False
    failovers: list[Failover] = field(default_factory=list)
    autopilot: Autopilot | None = None
    """`plans` and `deadline`: a `--deadline` run's."""
    endpoints: dict[str, EndpointFigures] = field(default_factory=dict)
    deadlines: Deadlines = field(default_factory=Deadlines)
    budget: BudgetFigures | None = None
    agents: AgentTotals | None = None
    orchestrator: Orchestration | None = None
    quality: Quality | None = None
    cache: CacheTotals | None = None
    answers: AnswerTotals | None = None
    traces: Traces | None = None
    batches: list[Batch] = field(default_factory=list)
    stopped: Stopped | None = None
    suspensions: list[Suspension] = field(default_factory=list)
    streaming: dict[str, StreamFigures] = field(default_factory=dict)
    spend: SpendFigures | None = None
    """`cost_per_min_usd`, `cost_projected_usd`, `cost_display`, `cost_breakdown`."""

    SECTIONS: ClassVar[tuple[str, ...]] = (
        "budget",
        "agents",
        "orchestrator",
        "quality",
        "cache",
        "answers",
        "traces",
        "stopped",
    )
    """The sections written only when the run used them (and the lists and maps below, when not empty)."""
    LISTS: ClassVar[tuple[str, ...]] = ("batches", "suspensions", "streaming")
    GROUPS: ClassVar[dict[str, type[JsonRecord]]] = {"autopilot": Autopilot, "spend": SpendFigures}
    """Fields that stand for several top-level keys."""

    def to_json(self) -> dict[str, Any]:
        data = super().to_json()
        for name in self.SECTIONS:
            if data[name] is None:
                del data[name]
        for name in self.LISTS:
            if not data[name]:
                del data[name]
        for name in self.GROUPS:
            group = data.pop(name)
            if group is not None:
                data.update(group)
        return _ordered(data)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        given = {**data}
        for name, group in cls.GROUPS.items():
            keys = group.json_keys()
            given[name] = {key: given.pop(key) for key in keys if key in given} if keys[0] in data else None
        return super().from_json(given)

    @classmethod
    def json_keys(cls) -> tuple[str, ...]:
        """The top-level keys, in the file's order (a group's keys where the group stands)."""
        return tuple(key for name in super().json_keys() for key in _keys_of(name))


def _keys_of(name: str) -> tuple[str, ...]:
    group = Summary.GROUPS.get(name)
    return group.json_keys() if group is not None else (name,)


def _ordered(data: dict[str, Any]) -> dict[str, Any]:
    """summary.json's keys in their order: the autopilot's after `failovers`, the cost fields last."""
    order = Summary.json_keys()
    return {key: data[key] for key in order if key in data}
