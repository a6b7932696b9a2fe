"""The agents an orchestrator spawned, as the run's events tell them: each one's parent and depth,
each parent's children in the order they came, the agents at each level, the order the grid groups
them in, and the run's critical path. No Textual.

The critical path is the longest chain of dependent calls, timed as the calls took and nothing
else: an agent's model calls one after another, each step's tools after its call (its longest
tool call; the calls of a step run side by side), and a spawned agent after the call of its
parent that spawned it; a parent's step that waits for its agents ends when the slowest of them
ends (a spawn that waits: its own agents; a `wait_agents` call: the agents spawned earlier
without waiting). What the run took beyond it (makespan minus the path) is waiting: for a slot,
for the rate limits, for the engine. Each call counts once: the attempt that decided its step
(a retried attempt's time is waiting too).

Kept from `TasksAdded` (with its spawn), `AgentStepped`, `ToolCallEnded` and the task's end
(`TaskSucceeded`). Each step is kept only of the agents of the tree (those spawned, and those that
spawned: from their first swarm call on); a multi-step agent that is neither is kept as its chain
so far, one small record (what it brings to the tree if it spawns later), and a plain run's
answers cost a dict lookup. The path is worked out when asked for (the run panel asks ten times a
second at most: a few microseconds an agent), never per event.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from swarm_tui.core.events import AgentStepped, Spawn, TasksAdded, TaskSucceeded, ToolCallEnded

WAIT_TOOL = "wait_agents"
SWARM_TOOLS = frozenset({"spawn_agents", WAIT_TOOL, "agent_result"})
"""The swarm tools' names: their time is their agents', not a tool's own."""


@dataclass(frozen=True, slots=True)
class CriticalPath:
    """The longest chain of dependent calls: how many model calls, and how long they and the
    tools between them took (seconds)."""

    calls: int
    seconds: float


@dataclass(slots=True)
class _Lead:
    """A multi-step agent's chain so far, before it is in the tree: its calls and tools added up."""

    ms: float = 0.0
    """The calls and the longest tool call of each step before `step`."""
    calls: int = 0
    step: int = 0
    call_ms: float = 0.0
    tool_ms: float = 0.0
    """Step `step`'s call, and its longest tool call so far."""

    def took(self, step: int, latency_ms: float) -> None:
        if self.step:
            self.ms += self.call_ms + self.tool_ms
        self.step, self.call_ms, self.tool_ms = step, latency_ms, 0.0
        self.calls += 1

    def before(self, step: int) -> tuple[float, int]:
        """(time, calls) of its chain before step `step`."""
        if self.step and self.step < step:
            return self.ms + self.call_ms + self.tool_ms, self.calls
        return self.ms, self.calls - (1 if self.step >= step else 0)


@dataclass(slots=True)
class _Agent:
    """What the path needs of one agent: each model call's latency by its step (the answer's last),
    each step's longest own tool call, and the steps that waited for earlier spawns."""

    lead_ms: float = 0.0
    lead_calls: int = 0
    """Its chain before it joined the tree (steps before its first swarm call)."""
    calls: dict[int, float] = field(default_factory=dict)
    """Latency (ms) of the model call of each step; the final answer's under `answered`."""
    answered: float | None = None
    tools: dict[int, float] = field(default_factory=dict)
    waits: set[int] = field(default_factory=set)
    """Steps that called `wait_agents`."""


class AgentTree:
    """Parents, depths, children and the critical path of a run's agents (see the module)."""

    def __init__(self) -> None:
        self.parent: dict[int, int] = {}
        """Each spawned agent's parent."""
        self.depth: dict[int, int] = {}
        """Each spawned agent's depth (an agent not here is a job's own: depth 0)."""
        self.children: dict[int, list[int]] = {}
        """Each parent's agents, in the order they were spawned."""
        self._spawn: dict[int, Spawn] = {}
        """The spawn that added each agent."""
        self._agents: dict[int, _Agent] = {}
        self._leads: dict[int, _Lead] = {}
        """Multi-step agents not in the tree (yet): their chains so far."""
        self.changed = 0
        """Bumped by every change (what was drawn from it may be stale)."""
        self._path: tuple[int, CriticalPath | None] = (-1, None)

    @property
    def spawning(self) -> bool:
        """An agent of the run has spawned agents."""
        return bool(self.parent)

    # ----------------------------------------------------------------- the events

    def added(self, event: TasksAdded) -> None:
        spawn = event.spawn
        if spawn is None:
            return
        kids = self.children.setdefault(spawn.parent, [])
        for index in event.indices:
            if index in self.parent:  # a log read twice (a resumed view): once each
                continue
            self.parent[index] = spawn.parent
            self.depth[index] = spawn.depth
            self._spawn[index] = spawn
            kids.append(index)
            self._agents.setdefault(index, _Agent())
        self._join(spawn.parent, spawn.step)
        self.changed += 1

    def stepped(self, event: AgentStepped) -> None:
        index, step = event.attempt.index, event.step
        agent = self._agents.get(index)
        if agent is None and not SWARM_TOOLS.intersection(event.tools):
            self._leads.setdefault(index, _Lead()).took(step, event.attempt.latency_ms)
            return
        agent = agent or self._join(index, step)
        agent.calls[step] = event.attempt.latency_ms
        self.changed += 1

    def tool_ended(self, event: ToolCallEnded) -> None:
        agent = self._agents.get(event.index)
        if agent is None:
            lead = self._leads.get(event.index)
            if lead is not None and lead.step == event.step and event.name not in SWARM_TOOLS:
                lead.tool_ms = max(lead.tool_ms, event.latency_ms)
            return
        if event.name == WAIT_TOOL:
            agent.waits.add(event.step)
        elif event.name not in SWARM_TOOLS:
            agent.tools[event.step] = max(agent.tools.get(event.step, 0.0), event.latency_ms)
        self.changed += 1

    def succeeded(self, event: TaskSucceeded) -> None:
        """An agent's answer (a task of a plain run, which is none of the tree's: a dict lookup)."""
        agent = self._agents.get(event.attempt.index)
        if agent is not None:
            agent.answered = event.attempt.latency_ms
            self.changed += 1

    def _join(self, index: int, step: int) -> _Agent:
        """An agent joins the tree at step `step` (its first swarm call): its chain before it, kept."""
        agent = self._agents.get(index)
        if agent is None:
            lead = self._leads.pop(index, None)
            ms, calls = lead.before(step) if lead is not None else (0.0, 0)
            agent = self._agents[index] = _Agent(ms, calls)
        return agent

    # ----------------------------------------------------------------- reading

    def depth_of(self, index: int) -> int:
        return self.depth.get(index, 0)

    def spawn_of(self, index: int) -> Spawn | None:
        """The spawn (its parent's tool call) that added an agent; None for a job's own task."""
        return self._spawn.get(index)

    def spawns_by(self, index: int) -> list[tuple[Spawn, list[int]]]:
        """Each spawn an agent made, in order, with the agents it added."""
        out: dict[tuple[int, int], tuple[Spawn, list[int]]] = {}
        for child in self.children.get(index, ()):
            spawn = self._spawn[child]
            out.setdefault((spawn.step, spawn.position), (spawn, []))[1].append(child)
        return list(out.values())

    def ancestry(self, index: int) -> list[int]:
        """The agent's ancestors, the root first (empty for a job's own task)."""
        chain: list[int] = []
        parent = self.parent.get(index)
        while parent is not None:
            chain.append(parent)
            parent = self.parent.get(parent)
        return chain[::-1]

    def descendants(self, index: int) -> list[int]:
        """Every agent below `index` (its children, theirs...), in the order the grid shows them."""
        out: list[int] = []
        stack = list(reversed(self.children.get(index, ())))
        while stack:
            child = stack.pop()
            out.append(child)
            stack.extend(reversed(self.children.get(child, ())))
        return out

    def levels(self, total: int) -> list[int]:
        """How many agents at each depth (depth 0: the job's own tasks)."""
        counts = [total - len(self.depth)]
        for depth in self.depth.values():
            while len(counts) <= depth:
                counts.append(0)
            counts[depth] += 1
        return counts

    def grouped(self, indices: Iterable[int]) -> list[int]:
        """`indices` in the grid's order: each job's task, then the agents below it, depth first
        (each parent's children in the order they were spawned); as they are without a spawn."""
        ordered = list(indices)
        if not self.parent:
            return ordered
        out: list[int] = []
        for index in ordered:
            if index in self.parent:
                continue
            out.append(index)
            out.extend(self.descendants(index))
        return out

    def critical_path(self) -> CriticalPath | None:
        """The run's critical path so far (None: no agent has taken a step); worked out once per change."""
        changed, path = self._path
        if changed == self.changed:
            return path
        roots = [index for index in self._agents if index not in self.parent]
        ends = [self._finish(root, 0.0, 0) for root in roots]
        best = max(ends, default=None)
        path = CriticalPath(best[1], best[0] / 1000) if best is not None and best[1] else None
        self._path = (self.changed, path)
        return path

    def _finish(self, index: int, start_ms: float, calls: int) -> tuple[float, int]:
        """(when the agent's chain ends, in ms, and its calls) given it starts at `start_ms` after
        `calls` calls of its ancestors: its calls and tools in turn, each waiting step ending
        with the slowest agent it waited for."""
        agent = self._agents.get(index)
        if agent is None:
            return start_ms, calls
        spawned = self._spawns_of(index)
        t, n = start_ms + agent.lead_ms, calls + agent.lead_calls
        call_ends: dict[int, tuple[float, int]] = {}
        for step in sorted(agent.calls):
            t, n = t + agent.calls[step], n + 1
            call_ends[step] = (t, n)
            best = (t + agent.tools.get(step, 0.0), n)
            for child, spawn in spawned:
                if self._waited_in(agent, spawn, step):
                    begun = call_ends.get(spawn.step, (t, n))
                    end = self._finish(child, *begun)
                    if end[0] > best[0]:
                        best = end
            t, n = best
        if agent.answered is not None:
            t, n = t + agent.answered, n + 1
        return t, n

    def _spawns_of(self, index: int) -> list[tuple[int, Spawn]]:
        return [(child, self._spawn[child]) for child in self.children.get(index, ())]

    @staticmethod
    def _waited_in(agent: _Agent, spawn: Spawn, step: int) -> bool:
        """The step of the parent that waited for a spawn's agents: its own (a spawn that waits),
        else the first later step that called `wait_agents`."""
        if spawn.wait:
            return step == spawn.step
        later = [s for s in agent.waits if s > spawn.step]
        return bool(later) and step == min(later)


def per_level(levels: Sequence[int]) -> str:
    """Agents per level as a person reads them: `1 · 50 · 4`."""
    return " · ".join(str(count) for count in levels)
