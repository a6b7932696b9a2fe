"""L2 planner: one call that splits the goal into sub-tasks, read robustly.

The answer is read with `extract_json` (fences, prose, a cut-off ending); when it still cannot
be read as a list of sub-tasks the planner is asked once more, with what was wrong. The plan
never has more sub-tasks than asked for.
"""

from __future__ import annotations

from typing import Any

from swarm_tui.jobs.swarm_spec import SwarmSpec
from swarm_tui.util.json_repair import JsonExtractionError, extract_json

PLAN_INDEX = -1
"""Journal index of the planner's calls (negative: not a task of the grid)."""


class PlanError(ValueError):
    def __init__(self, message: str, raw: str) -> None:
        super().__init__(message)
        self.raw = raw


def planner_body(spec: SwarmSpec, model: str, context: str = "") -> dict[str, Any]:
    assert spec.plan is not None
    n = spec.plan.agents
    messages = [{"role": "system", "content": spec.plan.system}]
    if context:
        messages.append({"role": "system", "content": context})
    messages.append(
        {
            "role": "user",
            "content": (
                f"Goal: {spec.goal}\n\n"
                f"Split the goal into {n} sub-tasks that independent workers can do in parallel, without seeing "
                f"each other's work. Answer with JSON only, in this form: "
                f'{{"subtasks": ["first sub-task", "second sub-task", ...]}} with exactly {n} strings.'
            ),
        }
    )
    return {
        "model": model,
        "messages": messages,
        "max_tokens": spec.plan.max_tokens,
        "response_format": {"type": "json_object"},
    }


def parse_plan(text: str, wanted: int) -> list[str]:
    """The sub-tasks in a planner's answer (at most `wanted`); raises `PlanError` keeping the raw text."""
    try:
        value = extract_json(text)
    except JsonExtractionError as exc:
        raise PlanError(str(exc), text) from None
    if isinstance(value, dict):
        value = (
            value.get("subtasks")
            or value.get("tasks")
            or next((v for v in value.values() if isinstance(v, list)), None)
        )
    if not isinstance(value, list):
        raise PlanError('expected {"subtasks": [...]} or a JSON list of sub-tasks', text)
    subtasks = []
    for item in value:
        if isinstance(item, dict):
            item = item.get("task") or item.get("description") or item.get("title") or ""
        if isinstance(item, str) and item.strip():
            subtasks.append(item.strip())
    if not subtasks:
        raise PlanError("the plan has no sub-tasks", text)
    return subtasks[:wanted]


async def make_plan(engine, spec: SwarmSpec, model: str, context: str = "") -> list[str]:
    """Ask for the plan; ask once more with the problem when the answer cannot be read."""
    assert spec.plan is not None
    body = planner_body(spec, model, context)
    result = await engine.call_direct("plan", PLAN_INDEX, body)
    try:
        return parse_plan(result.content, spec.plan.agents)
    except PlanError as exc:
        retry = {
            **body,
            "messages": [
                *body["messages"],
                {"role": "assistant", "content": result.content},
                {"role": "user", "content": f"That plan could not be read: {exc}. Answer again with the JSON only."},
            ],
        }
    result = await engine.call_direct("plan", PLAN_INDEX, retry)
    return parse_plan(result.content, spec.plan.agents)
