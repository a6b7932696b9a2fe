"""A job: its tasks, and the template that turns a prompt into a request.

Kept apart from the loaders so that what runs a job (the session, the swarm pipeline) needs only
this, not the parsers of either format.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from swarm_tui.core.task import Task
from swarm_tui.jobs.answer_spec import AnswerSpec
from swarm_tui.jobs.judge_spec import JudgeSpec
from swarm_tui.jobs.swarm_spec import SwarmSpec
from swarm_tui.tools.orchestrator_spec import OrchestratorSpec
from swarm_tui.tools.spec import ToolsSpec

if TYPE_CHECKING:
    from swarm_tui.jobs.tables import TableRows

__all__ = ["Job", "TaskTemplate", "MAX_PROBLEMS", "MAX_TASKS"]

MAX_PROBLEMS = 50
"""A Batch JSONL job stops being read at this many problems: the list stays readable."""
MAX_TASKS = 1_000_000
"""What one job may hold. A run keeps about 100 bytes of each task in memory (its state; the body
stays in the journal), and its journal about 750 bytes on disk: a larger job is refused, naming
this limit (a TOML `count` of 10**11 would otherwise take hours to check and a disk to journal);
split it into several runs."""


@dataclass(frozen=True)
class CacheChoice:
    """A job's `[cache]`: `mode` (`readwrite` with `[cache]` alone), `ttl` (seconds), `dir`."""

    mode: str = "readwrite"
    ttl_s: float | None = None
    dir: str | None = None


@dataclass(frozen=True)
class TaskTemplate:
    """How a TOML job turns a prompt into a request: shared context first, then the agent's system
    prompt, then the task. Kept so that later rounds and planned sub-tasks are built the same way."""

    model: str
    context: str = ""
    system: str = ""
    request: dict[str, Any] = field(default_factory=dict)

    def body(self, prompt: str, *, agent: int, total: int, memory: str = "") -> dict[str, Any]:
        messages: list[dict[str, str]] = []
        if self.context:
            messages.append(self._context_message)
        if memory:
            messages.append({"role": "system", "content": memory})
        if self.system:
            messages.append(
                self._static_system_message
                or {"role": "system", "content": self.system.format(agent=agent, index=agent - 1, total=total)}
            )
        messages.append({"role": "user", "content": prompt})
        return {"model": self.model, "messages": messages, **self.request}

    # Messages identical for every agent are one object shared by every task's body (bodies are
    # never changed in place: a later step or a trim builds a new body), not one copy per task.

    @cached_property
    def _context_message(self) -> dict[str, str]:
        return {"role": "system", "content": self.context}

    @cached_property
    def _static_system_message(self) -> dict[str, str] | None:
        """The system message when it has no placeholder (else each agent's is rendered)."""
        if "{" in self.system or "}" in self.system:
            return None
        return {"role": "system", "content": self.system}


@dataclass(frozen=True)
class Job:
    name: str
    source: str
    tasks: Sequence[Task]
    """In order; a Batch JSONL job's are read from its file each time they are gone through
    (`batch_jsonl.JsonlTasks`): a million bodies are never held at once."""
    model: str | None = None
    """The model the job names (TOML); None when each body names its own (JSONL)."""
    options: dict[str, Any] = field(default_factory=dict)
    """Kept for the run's metadata; always empty now that an unknown top-level key of a TOML job is
    an error (a typo such as `modle` must not be ignored while the job is sent)."""
    template: TaskTemplate | None = None
    swarm: SwarmSpec | None = None
    """Plan → fan-out → aggregate and memory, for TOML jobs that ask for them."""
    tools: ToolsSpec | None = None
    """Tools for multi-step agents (`[[tools.mcp]]`, `[[tools.python]]`, `[agents]`), if any."""
    lane: str | None = None
    """`lane = "live" | "batch" | "auto"` (TOML): how the tasks are carried; `--lane` wins."""
    judge: JudgeSpec | None = None
    """`[judge]` (TOML): a sampled LLM-as-a-judge score of the answers, and what drift does."""
    cache: CacheChoice | None = None
    """`[cache]` (TOML): the response cache for this job; `--cache`, `--cache-ttl`, `--cache-dir` win."""
    answer: AnswerSpec | None = None
    """`[answer]` (TOML) or `--schema FILE` (JSONL): what every answer is checked against, beyond
    its body's own `response_format`."""
    table: TableRows | None = None
    """A table job's rows (`jobs.tables`): the journal keeps each beside its task, and the run's
    meta its columns, so that `swarm-tui export` gives the answers back on the user's rows."""
    orchestrator: OrchestratorSpec | None = None
    """`[orchestrator]` (TOML) or `--orchestrate`: every task is an orchestrator, whose tools
    include the swarm tools (`tools.swarm_tools`): its model spawns, waits for and reads sub-agents."""
