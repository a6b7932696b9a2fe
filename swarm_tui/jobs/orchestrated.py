"""An orchestrator job made from a goal (`swarm-tui run --orchestrate "GOAL"`): one task, the
orchestrator, whose model spawns its own sub-agents (`tools.swarm_tools`). Without a job file it
takes the defaults (`tools.orchestrator_spec`); with a TOML job that has an `[orchestrator]` table,
that job's limits, prompts, tools and request parameters, the goal given in place of its own.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from swarm_tui.core.errors import InputError
from swarm_tui.core.task import Task
from swarm_tui.jobs.job import Job, TaskTemplate
from swarm_tui.tools.orchestrator_spec import OrchestratorSpec

ORCHESTRATOR_ID = "orchestrator"
"""The custom id of an orchestrator job's one task (its goal's): its sub-agents' ids derive from it."""
FLAG = "--orchestrate"


def literal(text: str) -> str:
    """`text` as a template whose placeholders are none (its braces kept as written)."""
    return text.replace("{", "{{").replace("}", "}}")


def orchestrator_job(goal: str, *, model: str | None, base: Job | None = None, path: Path | None = None) -> Job:
    """The job of one orchestrator given `goal`: `base`'s (the job file at `path`, which must have an
    `[orchestrator]` table) or the defaults'; `model`: the one the run asks (InputError without one)."""
    if not goal.strip():
        raise InputError.single(FLAG, "orchestrate", "the goal is empty: say what the orchestrator is to do")
    if base is not None and base.orchestrator is None:
        raise InputError.single(
            path or base.source,
            "orchestrator",
            f"{FLAG} with a job needs its [orchestrator] table (or run {FLAG} without the job)",
        )
    spec = replace(base.orchestrator, goal=goal) if base is not None and base.orchestrator is not None else None
    spec = spec or OrchestratorSpec(goal=goal, source=FLAG)
    template = base.template if base is not None and base.template is not None else None
    model = model or (template.model if template is not None else None)
    if not model:
        raise InputError.single(FLAG, "--model", "name the orchestrator's model: --model (or a profile that names one)")
    template = replace(template, model=model) if template is not None else TaskTemplate(model=model)
    template = replace(template, system=literal(spec.system_prompt()))
    task = Task(0, ORCHESTRATOR_ID, template.body(goal, agent=1, total=1))
    if base is not None:
        return replace(base, tasks=[task], model=model, template=template, orchestrator=spec)
    return Job(name="orchestrate", source=FLAG, tasks=[task], model=model, template=template, orchestrator=spec)
