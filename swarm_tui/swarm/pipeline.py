"""Plan → (warm-up) → fan-out → aggregate, over one or more rounds with rolling memory.

Every step is recorded in the journal (`swarm_state` in its meta: the plan, the rounds done,
the memory), so a killed run resumes where it stopped: the plan is not asked for again, a
round's successful workers are not sent again, and a finished round is not aggregated again.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from swarm_tui.core.events import RunFinished
from swarm_tui.core.task import Task
from swarm_tui.engine.settings import RunStopped
from swarm_tui.jobs import TaskTemplate
from swarm_tui.jobs.swarm_spec import SwarmSpec
from swarm_tui.swarm.aggregator import Aggregate, aggregate
from swarm_tui.swarm.memory import MEMORY_HEADER, RollingMemory, estimate_tokens
from swarm_tui.swarm.planner import PlanError, make_plan

if TYPE_CHECKING:
    from swarm_tui.engine.ports import Engine
    from swarm_tui.journal import Journal

WARMUP_INDEX = -3
STATE_KEY = "swarm_state"


def drop_memory(task: Task) -> Task | None:
    """Engine trimmer: the request without its rolling-memory message (None when it has none)."""
    messages = task.body.get("messages", [])
    kept = [
        m for m in messages if not (m.get("role") == "system" and str(m.get("content", "")).startswith(MEMORY_HEADER))
    ]
    if len(kept) == len(messages):
        return None
    return Task(task.index, task.custom_id, {**task.body, "messages": kept})


class SwarmPipeline:
    def __init__(
        self, engine: Engine, journal: Journal, run_dir: Path, spec: SwarmSpec, template: TaskTemplate
    ) -> None:
        """What the swarm's steps need: the engine that runs its calls, the journal that keeps its
        state, and the run directory its aggregates are written to (not the whole session)."""
        self.engine = engine
        self.journal = journal
        self.run_dir = run_dir
        self.spec = spec
        self.template = template
        self.state: dict[str, Any] = self.journal.queries.meta().get(STATE_KEY) or {
            "plan": None,
            "warmed": False,
            "rounds_done": [],
            "memory": [],
        }
        self.memory = RollingMemory.from_meta(spec.memory.window, self.state["memory"])
        self.last_aggregate: Aggregate | None = None
        self._phase = "plan"
        self.round_number = 1
        """The round being fanned out (the judge keys its scores to it)."""
        self.flushed: list[Callable[[], None]] = []
        """Told after every flush (the judge measures its baseline anew)."""
        self.settle: Callable[[], Awaitable[None]] | None = None
        """Awaited when a round's agents are done, before its memory is built (the judge's calls
        in flight: a drift it finds flushes the memory before the next round reads it)."""

    def flush_memory(self) -> int:
        """Forget the earlier rounds (a key in the TUI, or the judge's action on drift); later rounds
        start from the shared context only."""
        count = self.memory.flush()
        self._save()
        self.journal.records.log_event("memory_flushed", {"rounds": count})
        for listener in self.flushed:
            listener()
        return count

    async def run(self) -> RunFinished:
        try:
            return await self._run()
        except RunStopped:  # aborted (or out of budget) during planning, warm-up or aggregation
            pass
        except PlanError as exc:
            self.engine.stop_dispatch(f"the plan could not be read: {exc} (raw answer in the journal)")
        except Exception as exc:  # a planner / aggregator call that failed for good
            error = self.engine.client.classify(exc)
            self.engine.stop_dispatch(f"{self._phase} failed: {error.kind}: {error.message}")
        outcome = self.engine.outcome()
        self.journal.records.log_event("finished", {"reason": outcome.stop_reason, "phase": self._phase})
        return outcome

    async def _run(self) -> RunFinished:
        spec, engine = self.spec, self.engine
        if spec.plan is not None and self.state["plan"] is None:
            self._phase = "planning"
            engine.announce_phase("planning", f"{spec.plan.agents} sub-tasks for: {spec.goal[:60]}")
            self.state["plan"] = await make_plan(engine, spec, self.template.model, self.template.context)
            self._save()
            self.journal.records.log_event("plan", {"subtasks": self.state["plan"]})
        if spec.workers.warmup and not self.state["warmed"] and self.template.context:
            self._phase = "warm-up"
            engine.announce_phase("warm-up", "priming the provider's prefix cache with the shared context")
            await engine.call_direct(
                "warm-up", WARMUP_INDEX, self.template.body("Reply with OK.", agent=0, total=1) | {"max_tokens": 4}
            )
            self.state["warmed"] = True
            self._save()
        finished = None
        rounds = spec.memory.rounds
        for round_number in range(1, rounds + 1):
            if round_number in self.state["rounds_done"]:
                continue
            self.round_number = round_number
            indices = self._ensure_round_tasks(round_number)
            engine.announce_phase(
                "fan-out",
                f"round {round_number}/{rounds}: {len(indices)} agents" if rounds > 1 else f"{len(indices)} agents",
            )
            finished = await engine.run()
            if self.settle is not None:
                await self.settle()
            if finished.aborted or finished.stop_reason:
                return finished
            outputs = self._outputs(indices)
            summary = ""
            if spec.aggregate is not None and outputs:
                self._phase = "aggregation"
                engine.announce_phase("aggregating", f"{len(outputs)} answers")
                self.last_aggregate = await aggregate(
                    engine, spec, self.template.model, outputs, round_number, self.template.context
                )
                self._write_aggregate(self.last_aggregate, round_number, final=round_number == rounds)
                summary = self.last_aggregate.text
            else:
                summary = "\n".join(f"- {text.strip()[:300]}" for _, text in outputs)
            self.memory.add(round_number, summary)
            self.state["rounds_done"].append(round_number)
            self._save()
        engine.announce_phase("done", "aggregate written" if spec.aggregate else "")
        return finished or await engine.run()

    # ----------------------------------------------------------------- rounds

    def _round_prompts(self) -> list[tuple[str, str]]:
        """(custom_id stem, prompt) for one round's workers."""
        if self.state["plan"] is not None:
            total = len(self.state["plan"])
            width = len(str(total))
            return [
                (
                    f"agent-{i + 1:0{width}d}",
                    self.spec.workers.prompt.format(subtask=subtask, goal=self.spec.goal, agent=i + 1, total=total),
                )
                for i, subtask in enumerate(self.state["plan"])
            ]
        # the job's own tasks are round 1; computed before any later round is added, then kept in the state
        return [(t.custom_id, t.prompt) for t in sorted(self.engine.tasks.values(), key=lambda t: t.index)]

    def _ensure_round_tasks(self, round_number: int) -> list[int]:
        """The round's task indices, adding its tasks (with the memory window) if not journaled yet."""
        prompts = self.state.get("round_prompts") or self._round_prompts()
        self.state["round_prompts"] = prompts
        size = len(prompts)
        start = (round_number - 1) * size
        indices = list(range(start, start + size))
        if all(i in self.engine.tasks for i in indices):
            return indices
        memory = self.memory.render(self._memory_budget(prompts))
        rounds = self.spec.memory.rounds
        tasks = []
        for offset, (stem, prompt) in enumerate(prompts):
            custom_id = f"r{round_number}-{stem}" if rounds > 1 else stem
            body = self.template.body(prompt, agent=offset + 1, total=size, memory=memory)
            tasks.append(Task(start + offset, custom_id, body))
        self.engine.add_tasks(tasks)
        return indices

    def _memory_budget(self, prompts: list[tuple[str, str]]) -> int:
        """Tokens the memory may take so that the largest worker request stays within the context."""
        largest = max((estimate_tokens(p) for _, p in prompts), default=0)
        fixed = estimate_tokens(self.template.context) + estimate_tokens(self.template.system) + largest
        answer = int(
            self.template.request.get("max_tokens") or self.template.request.get("max_completion_tokens") or 1024
        )
        return self.spec.memory.context_tokens - fixed - answer - 64

    def _outputs(self, indices: list[int]) -> list[tuple[str, str]]:
        outputs = []
        for index in indices:
            result = self.journal.queries.result_of(index)
            if result and result["ok"]:
                content = result["response"]["choices"][0]["message"].get("content") or ""
                outputs.append((self.engine.tasks[index].custom_id, content))
        return outputs

    # ----------------------------------------------------------------- files and state

    def _write_aggregate(self, result: Aggregate, round_number: int, *, final: bool) -> None:
        run_dir = self.run_dir
        stem = "aggregate" if final else f"aggregate-round-{round_number}"
        data = {"goal": self.spec.goal, "round": round_number, **asdict(result)}
        (run_dir / f"{stem}.json").write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        body = (
            result.text
            if result.parsed is None
            else "```json\n" + json.dumps(result.parsed, indent=2, ensure_ascii=False) + "\n```"
        )
        (run_dir / f"{stem}.md").write_text(
            f"# {self.spec.goal}\n\nRound {round_number}, from {len(result.sources)} workers"
            f"{f', {result.levels} map-reduce levels' if result.levels else ''}.\n\n{body}\n",
            encoding="utf-8",
        )
        self.journal.records.log_event("aggregate", {"round": round_number, "file": f"{stem}.json"})

    def _save(self) -> None:
        self.state["memory"] = self.memory.to_meta()
        self.journal.writer.set_meta(STATE_KEY, self.state)
