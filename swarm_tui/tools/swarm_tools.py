"""The built-in swarm tools of an orchestrator job: an agent spawns sub-agents, waits for them and
reads their answers, as tool calls its model makes (`spawn_agents`, `wait_agents`, `agent_result`).

`SwarmTools` is the run's `agent_tools.AgentTools`: it answers these three itself and hands every
other call to the job's own `Toolbox`. A spawned sub-agent is a task of the same run (the same
engine, admission, rate limits, budget, cache, journal and console), a child of the agent that
spawned it, one level deeper; it reaches the engine through `SpawnHost` only (add tasks, read how
one ended, wait for some to end), never through the engine's parts.

The rules that keep a swarm sane, each answered as a tool result the model can read and act on
(never a crash): a spawn past `max_depth` (the orchestrator is depth 0), past `max_agents` in the
whole run, or of more than `max_spawn` agents at once is refused, nothing spawned; so are ids
that clash and tools the new agents may not have at their depth.

A spawn happens once: it is keyed by its call's place in the parent's transcript (`CallSite`:
the step and the call's position, the same in every session). The tasks it adds are journaled
with that place (`core.events.Spawn`), so a resumed run that runs the call again (its result was
not journaled before the process died) finds them and waits for them, spawning nothing. The
sub-agents' ids derive from the parent's (`orchestrator/1.3`): the first spawn of an agent names
its children `1.1`, `1.2`..., the second `2.1`..., unless the model names them.

A wait hands the answers back fitted to the parent's context: `result_chars` shared among the
agents it returns, each answer cut to its share with a pointer to `agent_result`, which pages
an answer whole. The result is JSON, so a model (and the simulator) reads it without guessing.
Agents the user cancelled (`x`) count as ended, cancelled: a wait never hangs on them.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from swarm_tui.core.events import Spawn
from swarm_tui.core.task import JSONObject, Task
from swarm_tui.tools.agent_tools import CallSite
from swarm_tui.tools.orchestrator_spec import OrchestratorSpec
from swarm_tui.tools.spec import DEFAULT_MAX_STEPS
from swarm_tui.tools.toolbox import Toolbox, ToolOutcome, openai_tool

SPAWN_AGENTS = "spawn_agents"
WAIT_AGENTS = "wait_agents"
AGENT_RESULT = "agent_result"
SWARM_TOOL_NAMES = (SPAWN_AGENTS, WAIT_AGENTS, AGENT_RESULT)

ID_PATTERN = re.compile(r"^[A-Za-z0-9_.-]{1,40}$")
PAGE_CHARS = 8_000
"""Characters of an answer one `agent_result` call returns."""
MIN_SHARE = 200
"""The least of an answer a wait shows, however many agents it returns."""
NOT_INHERITED = frozenset({"messages", "tools", "tool_choice", "parallel_tool_calls", "response_format"})
"""What a sub-agent's request does not take from its parent's (its model and parameters it does)."""

SPAWN_SCHEMA = openai_tool(
    SPAWN_AGENTS,
    "Start sub-agents that work in parallel, each on its own prompt, and (wait=true) return their "
    "answers when all have ended. Each sees only its prompt: make it self-contained.",
    {
        "type": "object",
        "properties": {
            "tasks": {
                "type": "array",
                "description": "one entry per sub-agent",
                "items": {
                    "type": "object",
                    "properties": {
                        "prompt": {"type": "string", "description": "the sub-agent's task, self-contained"},
                        "system": {"type": "string", "description": "its system prompt (default: the job's)"},
                        "tools": {
                            "type": "array",
                            "items": {"type": "string"},
                            "description": "the tools it may use, by name (default: all it may have at its depth)",
                        },
                        "id": {"type": "string", "description": "its id, to wait for it or read its answer"},
                    },
                    "required": ["prompt"],
                },
            },
            "wait": {
                "type": "boolean",
                "description": "true (default): return their answers; false: return their ids at once",
            },
        },
        "required": ["tasks"],
    },
)
WAIT_SCHEMA = openai_tool(
    WAIT_AGENTS,
    "Wait until sub-agents you spawned have ended and return their answers.",
    {
        "type": "object",
        "properties": {
            "ids": {
                "type": "array",
                "items": {"type": "string"},
                "description": "their ids (default: every sub-agent you spawned)",
            },
            "timeout_s": {"type": "number", "description": "return after this many seconds, ended or not"},
        },
    },
)
RESULT_SCHEMA = openai_tool(
    AGENT_RESULT,
    "The whole answer of a sub-agent you spawned, a page at a time (when a wait had to cut it).",
    {
        "type": "object",
        "properties": {
            "id": {"type": "string", "description": "the sub-agent's id"},
            "offset": {"type": "integer", "description": "the first character to return (default 0)"},
        },
        "required": ["id"],
    },
)
SWARM_SCHEMAS = (SPAWN_SCHEMA, WAIT_SCHEMA, RESULT_SCHEMA)


@dataclass(frozen=True, slots=True)
class Ended:
    """How a spawned agent ended: `succeeded` (its answer), `failed` (why), or `cancelled` (by the
    user: it waits, unfinished, until retried)."""

    state: str
    text: str


class SpawnHost(Protocol):
    """What the swarm tools ask of the engine that runs the run's agents (`engine.spawns`)."""

    def task_of(self, index: int) -> Task:
        """A task as it stands now (a spawning agent's id and request)."""

    @property
    def next_index(self) -> int:
        """The index the next task added gets."""

    def add_tasks(self, tasks: Sequence[Task], spawn: Spawn) -> list[int]:
        """Add `spawn`'s tasks to the run, journaled (with their ancestry) before it goes on."""

    def ended(self, index: int) -> Ended | None:
        """How a task ended; None while it has not."""

    async def settle(self, indices: Sequence[int], timeout_s: float | None = None) -> None:
        """Return when every one of `indices` has ended (`ended`), or after `timeout_s`."""


class _Refused(Exception):
    """A call the rules refuse: its message is the tool result (not ok); nothing was done."""


class SwarmTools:
    """The run's tools with the swarm tools beside the job's (see the module)."""

    def __init__(
        self,
        spec: OrchestratorSpec,
        toolbox: Toolbox | None = None,
        *,
        max_steps: int = DEFAULT_MAX_STEPS,
        context: str = "",
        spawned: Iterable[tuple[int, str, Spawn]] = (),
    ) -> None:
        """`toolbox`: the job's own tools (None: none); `context`: the job's shared context, sent
        first to every sub-agent as to the orchestrator; `spawned`: the agents earlier sessions
        spawned (the journal's `spawned()`), so that no spawn happens twice."""
        self.spec = spec
        self.toolbox = toolbox
        self._max_steps = max_steps
        self.context = context
        self._host: SpawnHost | None = None
        self._depth: dict[int, int] = {}
        """The depth of each spawned agent (an agent not here is a job's own: depth 0)."""
        self._ids: dict[int, str] = {}
        """Each spawned agent's id, as its parent names it."""
        self._children: dict[int, dict[str, int]] = {}
        """Each parent's children by id."""
        self._spawns: dict[tuple[int, str], list[int]] = {}
        """What each spawn call added, by (parent, the call's place in its transcript)."""
        self._waves: dict[int, int] = {}
        """How many spawn calls each parent has made."""
        self._root_tools: list[dict[str, Any]] | None = None
        for index, custom_id, spawn in spawned:
            self._register(index, custom_id.rsplit("/", 1)[-1], spawn)

    def attach(self, host: SpawnHost) -> None:
        """The engine the spawned agents join (it is built with these tools: given once, after)."""
        self._host = host

    # ----------------------------------------------------------------- what the engine asks

    @property
    def max_steps(self) -> int:
        return self._max_steps

    @property
    def spawned(self) -> int:
        """Agents spawned in the run so far (every level, every session)."""
        return len(self._depth)

    def depth_of(self, index: int) -> int:
        return self._depth.get(index, 0)

    def offered_to(self, agent: int) -> list[dict[str, Any]]:
        """A job's own task (an orchestrator) is offered the job's tools and the swarm tools; a
        spawned agent's request names its own (those it may have at its depth), or none."""
        if agent in self._depth:
            return []
        if self._root_tools is None:  # after the job's tools started (the engine runs after)
            own = self.toolbox.offered_to(agent) if self.toolbox is not None else []
            self._root_tools = [*own, *(SWARM_SCHEMAS if self.spec.max_depth >= 1 else ())]
        return self._root_tools

    async def call(self, name: str, arguments: str, caller: int = 0, *, site: CallSite | None = None) -> ToolOutcome:
        """A swarm tool's call, answered here; any other goes to the job's toolbox."""
        if name not in SWARM_TOOL_NAMES:
            if self.toolbox is not None:
                return await self.toolbox.call(name, arguments, caller, site=site)
            return ToolOutcome(f"error: no tool named {name!r} (tools: {', '.join(SWARM_TOOL_NAMES)})", False, 0.0)
        started = time.monotonic()
        try:
            parsed = _arguments(arguments)
            if self._host is None:
                raise _Refused("the swarm tools are not attached to a run (nothing was spawned)")
            if name == SPAWN_AGENTS:
                text = await self._spawn_agents(self._host, parsed, caller, site)
            elif name == WAIT_AGENTS:
                text = await self._wait_agents(self._host, parsed, caller)
            else:
                text = self._agent_result(self._host, parsed, caller)
        except _Refused as refused:
            return ToolOutcome(f"{name} refused: {refused}", False, (time.monotonic() - started) * 1000)
        return ToolOutcome(text, True, (time.monotonic() - started) * 1000)

    # ----------------------------------------------------------------- spawn_agents

    async def _spawn_agents(self, host: SpawnHost, args: dict[str, Any], parent: int, site: CallSite | None) -> str:
        wait = args.get("wait", True)
        if not isinstance(wait, bool):
            raise _Refused(f"wait must be true or false, not {wait!r}; nothing was spawned")
        place = (parent, f"{site.step}:{site.position}") if site is not None else None
        children = self._spawns.get(place) if place is not None else None
        if children is None:  # a new call (not one run again after a stop): spawn
            children = self._spawn_new(host, args, parent, site, wait)
        ids = [self._ids[index] for index in children]
        depth = self.depth_of(children[0])
        if not wait:
            return _dumps(
                {
                    "spawned": ids,
                    "depth": depth,
                    "running": True,
                    "next": f"{WAIT_AGENTS} returns their answers (ids {_span(ids)})",
                }
            )
        await host.settle(children)
        return _dumps({"spawned": len(ids), "depth": depth, **self._answers(host, children)})

    def _spawn_new(
        self, host: SpawnHost, args: dict[str, Any], parent: int, site: CallSite | None, wait: bool
    ) -> list[int]:
        spec = self.spec
        depth = self.depth_of(parent) + 1
        if depth > spec.max_depth:
            raise _Refused(
                f"these agents would be at depth {depth}, past max_depth {spec.max_depth} (the orchestrator is "
                "depth 0); do this part yourself. Nothing was spawned."
            )
        entries = args.get("tasks")
        if not isinstance(entries, list) or not entries:
            raise _Refused("tasks must be a non-empty array of {prompt, system?, tools?, id?}; nothing was spawned")
        if len(entries) > spec.max_spawn:
            raise _Refused(
                f"{len(entries)} agents in one call, past max_spawn {spec.max_spawn}: spawn them in calls of at most "
                f"{spec.max_spawn}. Nothing was spawned."
            )
        left = spec.max_agents - self.spawned
        if len(entries) > left:
            raise _Refused(
                f"{len(entries)} agents would pass max_agents {spec.max_agents} for the run ({self.spawned} spawned "
                f"so far): {left} more may be spawned. Nothing was spawned."
            )
        parent_task = host.task_of(parent)
        wave = self._waves.get(parent, 0) + 1
        taken = set(self._children.get(parent, {}))
        tasks: list[Task] = []
        first = host.next_index
        checked = [self._entry(entry, number, depth, taken) for number, entry in enumerate(entries, start=1)]
        named = {agent_id for agent_id, _, _, _ in checked if agent_id is not None}
        if len(named) < sum(agent_id is not None for agent_id, _, _, _ in checked):
            raise _Refused("two tasks of the call have the same id; nothing was spawned")
        taken |= named
        for number, (given, prompt, system, tools) in enumerate(checked, start=1):
            agent_id = given
            if agent_id is None:  # the wave's number and the agent's place in it, unless another took it
                agent_id, suffix = f"{wave}.{number}", 1
                while agent_id in taken:
                    agent_id, suffix = f"{wave}.{number}-{suffix}", suffix + 1
                taken.add(agent_id)
            body = self._child_body(parent_task.body, agent_id, depth, prompt, system, tools)
            tasks.append(Task(first + len(tasks), f"{parent_task.custom_id}/{agent_id}", body))
        step, position, call_id = (site.step, site.position, site.call_id) if site is not None else (0, 0, "")
        spawn = Spawn(parent, depth, step, position, call_id, wait)
        added = host.add_tasks(tasks, spawn)
        for task in tasks:
            self._register(task.index, task.custom_id.rsplit("/", 1)[-1], spawn)
        return added or [task.index for task in tasks]

    def _entry(
        self, entry: Any, number: int, depth: int, taken: set[str]
    ) -> tuple[str | None, str, str | None, list[str] | None]:
        """(id (None: not named), prompt, system, tool names) of one of a spawn's tasks, each checked."""
        where = f"tasks[{number - 1}]"
        if not isinstance(entry, dict):
            raise _Refused(f"{where} must be an object {{prompt, system?, tools?, id?}}; nothing was spawned")
        prompt = entry.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            raise _Refused(f"{where}.prompt must be a non-empty string; nothing was spawned")
        system = entry.get("system")
        if system is not None and not isinstance(system, str):
            raise _Refused(f"{where}.system must be a string; nothing was spawned")
        tools = entry.get("tools")
        if tools is not None:
            if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
                raise _Refused(f"{where}.tools must be an array of tool names; nothing was spawned")
            allowed = self._tool_names(depth)
            unknown = [t for t in tools if t not in allowed]
            if unknown:
                raise _Refused(
                    f"{where}.tools: {', '.join(unknown)} not available at depth {depth} (available: "
                    f"{', '.join(allowed) or 'none'}); nothing was spawned"
                )
        agent_id = entry.get("id")
        if agent_id is not None:
            if not isinstance(agent_id, str) or not ID_PATTERN.match(agent_id):
                raise _Refused(
                    f"{where}.id must be 1 to 40 letters, digits, '.', '_' or '-', not {agent_id!r}; "
                    "nothing was spawned"
                )
            if agent_id in taken:
                raise _Refused(f"{where}.id {agent_id!r} is taken by another of your agents; nothing was spawned")
        return agent_id, prompt, system, tools

    def _tool_names(self, depth: int) -> list[str]:
        """The tools an agent at `depth` may have: the job's, and the swarm tools above max_depth."""
        own = [schema["function"]["name"] for schema in (self.toolbox.openai_tools() if self.toolbox else [])]
        return [*own, *(SWARM_TOOL_NAMES if depth < self.spec.max_depth else ())]

    def _child_body(
        self,
        parent: JSONObject,
        agent_id: str,
        depth: int,
        prompt: str,
        system: str | None,
        tools: list[str] | None,
    ) -> JSONObject:
        """A sub-agent's request: its parent's model and parameters, the job's shared context first,
        its system prompt, its task; and the tools it may have (all at its depth, or those named)."""
        spec = self.spec
        messages: list[dict[str, str]] = []
        if self.context:
            messages.append({"role": "system", "content": self.context})
        messages.append({"role": "system", "content": spec.child_prompt(system or spec.child_system, agent_id, depth)})
        messages.append({"role": "user", "content": prompt})
        body: JSONObject = {key: value for key, value in parent.items() if key not in NOT_INHERITED}
        body["messages"] = messages
        names = self._tool_names(depth) if tools is None else tools
        schemas = [*(self.toolbox.openai_tools() if self.toolbox else []), *SWARM_SCHEMAS]
        offered = [schema for schema in schemas if schema["function"]["name"] in names]
        if offered:
            body["tools"] = offered
        return body

    def _register(self, index: int, agent_id: str, spawn: Spawn) -> None:
        self._depth[index] = spawn.depth
        self._ids[index] = agent_id
        self._children.setdefault(spawn.parent, {})[agent_id] = index
        place = (spawn.parent, spawn.key)
        added = self._spawns.setdefault(place, [])
        if not added:
            self._waves[spawn.parent] = self._waves.get(spawn.parent, 0) + 1
        added.append(index)

    # ----------------------------------------------------------------- wait_agents, agent_result

    async def _wait_agents(self, host: SpawnHost, args: dict[str, Any], parent: int) -> str:
        children = self._children.get(parent, {})
        if not children:
            raise _Refused("you have spawned no agents to wait for")
        asked = args.get("ids")
        if asked is None:
            indices = list(children.values())
        elif not isinstance(asked, list) or not asked or not all(isinstance(i, str) for i in asked):
            raise _Refused("ids must be a non-empty array of your agents' ids")
        else:
            indices = [self._child(parent, agent_id) for agent_id in asked]
        timeout = args.get("timeout_s")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0):
            raise _Refused(f"timeout_s must be a positive number of seconds, not {timeout!r}")
        await host.settle(indices, float(timeout) if timeout is not None else None)
        return _dumps(self._answers(host, indices))

    def _agent_result(self, host: SpawnHost, args: dict[str, Any], parent: int) -> str:
        agent_id = args.get("id")
        if not isinstance(agent_id, str):
            raise _Refused("id must be the id of an agent you spawned")
        index = self._child(parent, agent_id)
        offset = args.get("offset", 0)
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise _Refused(f"offset must be a whole number from 0, not {offset!r}")
        ended = host.ended(index)
        if ended is None:
            return _dumps({"id": agent_id, "state": "running"})
        page = ended.text[offset : offset + PAGE_CHARS]
        following = offset + len(page)
        return _dumps(
            {
                "id": agent_id,
                "state": ended.state,
                "answer" if ended.state == "succeeded" else "error": page,
                "offset": offset,
                "total_chars": len(ended.text),
                "next_offset": following if following < len(ended.text) else None,
            }
        )

    def _child(self, parent: int, agent_id: str) -> int:
        children = self._children.get(parent, {})
        index = children.get(agent_id)
        if index is None:
            raise _Refused(f"no agent of yours is called {agent_id!r} (yours: {_span(list(children))})")
        return index

    def _answers(self, host: SpawnHost, indices: Sequence[int]) -> dict[str, Any]:
        """The agents' answers, each cut to its share of `result_chars`, and how many ended how."""
        share = max(MIN_SHARE, self.spec.result_chars // max(1, len(indices)))
        agents: list[dict[str, Any]] = []
        counts: dict[str, int] = {}
        for index in indices:
            agent_id = self._ids[index]
            ended = host.ended(index)
            state = ended.state if ended is not None else "running"
            counts[state] = counts.get(state, 0) + 1
            entry: dict[str, Any] = {"id": agent_id, "state": state}
            if ended is not None:
                text = ended.text
                entry["answer" if state == "succeeded" else "error"] = text[:share]
                if len(text) > share:
                    entry["cut"] = (
                        f"{share:,} of {len(text):,} characters shown; "
                        f'{AGENT_RESULT}(id="{agent_id}", offset={share}) gives the rest'
                    )
            agents.append(entry)
        return {"ended": counts, "agents": agents}


def _arguments(text: str) -> dict[str, Any]:
    try:
        parsed = json.loads(text or "{}")
    except json.JSONDecodeError as exc:
        raise _Refused(f"the arguments are not valid JSON ({exc.msg}): {text[:200]!r}") from None
    if not isinstance(parsed, dict):
        raise _Refused("the arguments must be a JSON object")
    return parsed


def _dumps(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False)


def _span(ids: Sequence[str]) -> str:
    """Ids as a person reads them: all of a few, the first and last of many."""
    if len(ids) <= 6:
        return ", ".join(ids) or "none"
    return f"{', '.join(ids[:3])} ... {ids[-1]} ({len(ids)})"
