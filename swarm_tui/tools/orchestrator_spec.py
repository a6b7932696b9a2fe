"""What an orchestrator job declares (`[orchestrator]` in a TOML job, or `run --orchestrate GOAL`):
an agent whose tools include the built-in swarm tools (`swarm_tools.SwarmTools`), so that the model
itself decides how many sub-agents to spawn, in how many waves, and whether they spawn their own.

    [orchestrator]
    goal = "Survey retry strategies of LLM clients"   # the orchestrator's task (or the job's [tasks])
    max_depth = 2        # sub-agents of sub-agents, at most this deep (the orchestrator is depth 0)
    max_agents = 100     # sub-agents spawned in the whole run, every level
    max_spawn = 100      # sub-agents one spawn_agents call may start
    result_chars = 16000 # characters of answers one wait returns (each answer cut to its share)
    # system = "..."       the orchestrator's system prompt (default: how to use the swarm tools)
    # child_system = "..." a sub-agent's, unless its spawn names one ({id}, {depth}, {max_depth})

No running here (see `swarm_tools`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

DEFAULT_MAX_DEPTH = 2
DEFAULT_MAX_AGENTS = 100
"""Kimi K2.5's Agent Swarm creates up to 100 sub-agents."""
DEFAULT_RESULT_CHARS = 16_000
"""About 4,000 tokens of answers a wait hands back: 50 answers of 320 characters each, or one of
16,000; a longer answer is cut to its share with a pointer to `agent_result`, which pages it."""
MAX_DEPTH_LIMIT = 8
MAX_AGENTS_LIMIT = 10_000

DEFAULT_SYSTEM = (
    "You are the orchestrator of a swarm of sub-agents. Break the task down and delegate it: "
    "spawn_agents starts sub-agents that work in parallel, each on a self-contained prompt (they see "
    "nothing but their prompt), and returns their answers (wait=true) or their ids at once (wait=false: "
    "collect the answers with wait_agents). Spawn a second wave when its parts depend on the first "
    "wave's answers; agent_result gives an answer whole when a wait had to cut it. Then answer the task "
    "yourself, from their answers. Limits: {max_agents} sub-agents in the whole run, {max_spawn} per "
    "spawn_agents call, {max_depth} levels deep."
)
DEFAULT_CHILD_SYSTEM = (
    "You are sub-agent {id} of an orchestrated swarm (depth {depth} of at most {max_depth}). Do the task "
    "you are given and answer it in full: your answer goes back to the agent that spawned you."
)
CAN_SPAWN = " You may spawn sub-agents of your own with spawn_agents when your task splits into parts."

ORCHESTRATOR_KEYS = frozenset(
    {"goal", "system", "child_system", "max_depth", "max_agents", "max_spawn", "result_chars"}
)


@dataclass(frozen=True)
class OrchestratorSpec:
    goal: str = ""
    """The orchestrator's task; empty: the job's tasks are orchestrators, each."""
    system: str = DEFAULT_SYSTEM
    child_system: str = DEFAULT_CHILD_SYSTEM
    max_depth: int = DEFAULT_MAX_DEPTH
    max_agents: int = DEFAULT_MAX_AGENTS
    max_spawn: int = DEFAULT_MAX_AGENTS
    result_chars: int = DEFAULT_RESULT_CHARS
    source: str = ""
    """The file that declared it (`--orchestrate`: the flag)."""

    def system_prompt(self) -> str:
        """The orchestrator's system prompt, its limits said."""
        return self.render(self.system)

    def child_prompt(self, template: str, agent_id: str, depth: int) -> str:
        """A sub-agent's system prompt (`template`: its spawn's or the job's), its place said; one
        that may spawn agents of its own is told so."""
        text = self.render(template, id=agent_id, depth=str(depth))
        return text + CAN_SPAWN if depth < self.max_depth and template == self.child_system else text

    def render(self, template: str, **values: str) -> str:
        """`template` with its limits (and `values`) filled in: only these names are replaced, so a
        prompt's other braces stay as written."""
        known = {
            "max_depth": str(self.max_depth),
            "max_agents": str(self.max_agents),
            "max_spawn": str(self.max_spawn),
            **values,
        }
        for name, value in known.items():
            template = template.replace("{" + name + "}", value)
        return template

    def to_meta(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_meta(cls, data: dict[str, Any]) -> OrchestratorSpec:
        return cls(**{key: value for key, value in data.items() if key in cls.__dataclass_fields__})


Report = Callable[[str, str], None]
"""(dotted field, problem): how a problem is reported (the job checker locates its line)."""


def parse_orchestrator_spec(doc: dict[str, Any], source: str, report: Report) -> OrchestratorSpec | None:
    """The `[orchestrator]` table of a TOML document; None when it has none."""
    table = doc.get("orchestrator")
    if table is None:
        return None
    if not isinstance(table, dict):
        report("orchestrator", "must be a table ([orchestrator] goal, max_depth, max_agents, ...)")
        return None
    for key in table:
        if key not in ORCHESTRATOR_KEYS:
            report(f"orchestrator.{key}", f"unknown key (known: {', '.join(sorted(ORCHESTRATOR_KEYS))})")
    texts: dict[str, str] = {}
    for key in ("goal", "system", "child_system"):
        value = table.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or (key != "goal" and not value.strip()):
            report(f"orchestrator.{key}", "must be a non-empty string")
            continue
        texts[key] = value
    max_depth = _count(table, "max_depth", DEFAULT_MAX_DEPTH, MAX_DEPTH_LIMIT, report)
    max_agents = _count(table, "max_agents", DEFAULT_MAX_AGENTS, MAX_AGENTS_LIMIT, report)
    max_spawn = _count(table, "max_spawn", min(DEFAULT_MAX_AGENTS, max_agents), MAX_AGENTS_LIMIT, report)
    if max_spawn > max_agents:
        report("orchestrator.max_spawn", f"must be at most max_agents ({max_agents}), not {max_spawn}")
        max_spawn = max_agents
    result_chars = _count(table, "result_chars", DEFAULT_RESULT_CHARS, 1_000_000, report, least=1_000)
    return OrchestratorSpec(
        goal=texts.get("goal", ""),
        system=texts.get("system", DEFAULT_SYSTEM),
        child_system=texts.get("child_system", DEFAULT_CHILD_SYSTEM),
        max_depth=max_depth,
        max_agents=max_agents,
        max_spawn=max_spawn,
        result_chars=result_chars,
        source=source,
    )


def _count(table: dict[str, Any], key: str, default: int, most: int, report: Report, least: int = 1) -> int:
    value = table.get(key, default)
    if isinstance(value, int) and not isinstance(value, bool) and least <= value <= most:
        return value
    report(f"orchestrator.{key}", f"must be an integer from {least:,} to {most:,}, not {value!r}")
    return default
