"""What a session runs besides its plan (`records.RunPlan`): where its engines run (`RayOptions`),
the embedded simulator of the demo (`DEMO_SIM`), and the run's contents (`RunContents`: its
tasks, where each stands, and the job's parts)."""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass, field

from swarm_tui.core.checks import AnswerSpec
from swarm_tui.core.events import TaskState
from swarm_tui.core.task import Task
from swarm_tui.jobs import TaskTemplate
from swarm_tui.jobs.swarm_spec import SwarmSpec
from swarm_tui.records import JudgeRecord
from swarm_tui.sim import SimConfig
from swarm_tui.tools import ToolsSpec
from swarm_tui.tools.orchestrator_spec import OrchestratorSpec

DEMO_SIM = SimConfig(latency_ms=700.0, latency_sigma=0.6, error_rate=0.1, seed=11547)
"""The embedded simulator of the demo: slow enough to watch, with about fifteen 5xx to retry, and
(this seed, the demo's 100 agents) agents 71 and 99 failing all four attempts, so that the error
log, `r` (their fifth call succeeds) and pause can be tried without a single `--sim-*` flag."""


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
    judge: JudgeRecord | None = None
    """The judge's spec and its own endpoint (None: no judge)."""
    orchestrator: OrchestratorSpec | None = None
    """An orchestrator job's (its tasks spawn sub-agents: `tools.swarm_tools`); None: none."""
    answer: AnswerSpec | None = None
    """The job's answer checks (`[answer]`, `--schema`) beyond the bodies' own formats."""
