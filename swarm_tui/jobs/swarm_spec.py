"""What a swarm job asks for beyond a list of tasks: plan → fan-out → aggregate, with memory.

Read from a TOML job's `goal`, `[plan]`, `[workers]`, `[aggregate]` and `[memory]` sections
(see sample_jobs/research-swarm.toml). Validation problems are reported with file, line and
field like every other job problem.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

DEFAULT_WORKER_PROMPT = "Goal: {goal}\n\nYour part: {subtask}"
DEFAULT_AGGREGATE_PROMPT = (
    "You are the aggregator of a swarm. Merge the workers' answers below into one report for the goal: "
    "what was found, where the workers agree and disagree, and what is still open."
)


@dataclass(frozen=True)
class PlanSpec:
    agents: int = 10
    system: str = "You are the planner of a swarm of sub-agents."
    max_tokens: int = 2048


@dataclass(frozen=True)
class WorkerSpec:
    prompt: str = DEFAULT_WORKER_PROMPT
    json: bool = False
    warmup: bool = False


@dataclass(frozen=True)
class AggregateSpec:
    prompt: str = DEFAULT_AGGREGATE_PROMPT
    json: bool = False
    max_tokens: int = 2048
    chunk_tokens: int = 6000
    """Worker outputs larger than this are reduced in chunks first (map-reduce)."""


@dataclass(frozen=True)
class MemorySpec:
    rounds: int = 1
    window: int = 5
    context_tokens: int = 128_000


@dataclass(frozen=True)
class SwarmSpec:
    goal: str
    plan: PlanSpec | None
    workers: WorkerSpec
    aggregate: AggregateSpec | None
    memory: MemorySpec

    @property
    def is_pipeline(self) -> bool:
        return self.plan is not None or self.aggregate is not None or self.memory.rounds > 1

    def to_meta(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)

    @classmethod
    def from_meta(cls, data: dict[str, Any]) -> SwarmSpec:
        return cls(
            goal=data["goal"],
            plan=PlanSpec(**data["plan"]) if data.get("plan") else None,
            workers=WorkerSpec(**data["workers"]),
            aggregate=AggregateSpec(**data["aggregate"]) if data.get("aggregate") else None,
            memory=MemorySpec(**data["memory"]),
        )


_SECTIONS: dict[str, tuple[type, dict[str, type]]] = {
    "plan": (PlanSpec, {"agents": int, "system": str, "max_tokens": int}),
    "workers": (WorkerSpec, {"prompt": str, "json": bool, "warmup": bool}),
    "aggregate": (AggregateSpec, {"prompt": str, "json": bool, "max_tokens": int, "chunk_tokens": int}),
    "memory": (MemorySpec, {"rounds": int, "window": int, "context_tokens": int}),
}


def parse_swarm_spec(doc: dict[str, Any], add_problem: Callable[[str, str], None]) -> SwarmSpec | None:
    """The swarm sections of a TOML job, or None when it has none. Problems go to `add_problem(field, msg)`."""
    if not any(key in doc for key in ("goal", *_SECTIONS)):
        return None
    goal = doc.get("goal", "")
    if not isinstance(goal, str):
        add_problem("goal", "must be a string")
        goal = ""
    built: dict[str, Any] = {}
    for section, (cls, types) in _SECTIONS.items():
        table = doc.get(section)
        if table is None:
            built[section] = None
            continue
        if not isinstance(table, dict):
            add_problem(section, "must be a table")
            built[section] = None
            continue
        values = {}
        for key, value in table.items():
            expected = types.get(key)
            if expected is None:
                add_problem(f"{section}.{key}", f"unknown setting (known: {', '.join(types)})")
            elif not isinstance(value, expected) or (
                expected is int and isinstance(value, int) and (isinstance(value, bool) or value < 1)
            ):
                what = "a positive integer" if expected is int else f"a {expected.__name__}"
                add_problem(f"{section}.{key}", f"must be {what}, not {value!r}")
            else:
                values[key] = value
        built[section] = cls(**values)
    if built["plan"] is not None and not goal:
        add_problem("goal", "a [plan] needs a goal to split")
    return SwarmSpec(
        goal=goal,
        plan=built["plan"],
        workers=built["workers"] or WorkerSpec(),
        aggregate=built["aggregate"],
        memory=built["memory"] or MemorySpec(),
    )
