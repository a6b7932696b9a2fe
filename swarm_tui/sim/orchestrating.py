"""The simulated model as an orchestrator: it spawns sub-agents in waves, reads their answers and
answers quoting them. Pure rules, no HTTP, no clock; nothing of the client's is imported (the tool
names and the shape of their results are written here again, so that a bug on one side cannot
hide the same bug on the other).

Who orchestrates
    A request offering a ``spawn_agents`` tool, whose task (its first user message) carries no
    ``[[sim:spawn=...]]`` marker: two waves, their sizes drawn from the seed and the task (6-12,
    then 3-6). ``[[sim:spawn=0]]``: never. ``[[sim:spawn=A+B/C/D]]``: waves of A then B agents; each
    agent of the first wave is told ``[[sim:spawn=C/D]]`` (so it spawns C of its own, each of which
    spawns D), the later waves ``[[sim:spawn=0]]``. A task marked to spawn calls ``spawn_agents``
    even when its request does not offer it (a model told to delegate names the tool it was not
    given, as models do): the client refuses it, so the depth limit can be tested.

The loop, from the conversation alone (each request carries it whole)
    1. the first wave: ``spawn_agents(tasks=[...], wait=true)``, each task ``Part i of A of the
       goal: <goal> [[sim:spawn=...]]``;
    2. each later wave, built from the answers so far: ``Follow-up i of B on <id>: <its answer,
       folded>``, spawned with ``wait=false`` (the second wave: its ids come back at once), then
       ``wait_agents(ids=[...])``, or with ``wait=true`` (the third, the fifth...);
    3. the final answer: ``Sim orchestrator answer to: <goal>``, a line saying how many answered in
       how many waves, then one line per agent, ``[<id>] <its answer>`` folded to 120 characters
       (``[<id>] failed: <why>`` for one that failed). A spawn the client refused ends the loop at
       once: the answer says ``spawn refused: <the client's words>``.

The answers are read from the tool results: JSON objects whose ``agents`` list holds each agent's
``id``, ``state`` and ``answer`` (or ``error``); markers inside quoted answers are dropped, so a
quote never scripts another agent.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from swarm_tui.sim.tokens import content_text
from swarm_tui.sim.tool_request import ToolRequest
from swarm_tui.sim.tools import first_user_text

__all__ = ["SWARM_TOOLS", "Orchestration", "orchestrate"]

SPAWN, WAIT, RESULT = "spawn_agents", "wait_agents", "agent_result"
SWARM_TOOLS = frozenset({SPAWN, WAIT, RESULT})
"""Never picked at random by an agent's tool step: only an orchestrator calls them."""

_MARKER = re.compile(r"\[\[sim:spawn=(\d+(?:\+\d+)*(?:/\d+(?:\+\d+)*)*)\]\]", re.IGNORECASE)
_ANY_MARKER = re.compile(r"\[\[sim:[^\]]*\]\]", re.IGNORECASE)
QUOTE_WIDTH = 120
GOAL_WIDTH = 100


@dataclass(frozen=True, slots=True)
class Orchestration:
    """An orchestrator's turn: the step's calls (name, JSON arguments), or its final answer."""

    calls: list[tuple[str, str]] | None
    content: str | None


@dataclass(frozen=True, slots=True)
class _Script:
    waves: tuple[int, ...]
    below: str
    """The marker each agent of the first wave is given (``0``: it spawns none)."""


@dataclass(slots=True)
class _Called:
    name: str
    arguments: dict[str, Any]
    result: str | None


def orchestrate(seed: int, messages: Sequence[Any], tools: ToolRequest | None) -> Orchestration | None:
    """The turn of an agent that orchestrates (None: this one does not: see the module)."""
    task = first_user_text(messages)
    offered = tools is not None and tools.calls_allowed and any(t.name == SPAWN for t in tools.tools)
    script = _script(seed, task, offered)
    if script is None:
        return None
    called = _swarm_calls(messages)
    spawns = [c for c in called if c.name == SPAWN]
    answers = _answers(called)
    refused = next((c.result for c in spawns if c.result is not None and not _is_json(c.result)), None)
    if refused is not None:
        return Orchestration(None, _final(task, answers, len(spawns), refused))
    last = spawns[-1] if spawns else None
    if last is not None and last.arguments.get("wait") is False and not _waited_after(called, last):
        ids = _spawned_ids(last.result)
        return Orchestration([(WAIT, _dumps({"ids": ids}))], None)
    if len(spawns) < len(script.waves):
        wave = len(spawns)
        return Orchestration([(SPAWN, _dumps(_wave(task, script, wave, answers)))], None)
    return Orchestration(None, _final(task, answers, len(spawns), None))


# ------------------------------------------------------------------------- the script


def _script(seed: int, task: str, offered: bool) -> _Script | None:
    found = _MARKER.search(task)
    if found is not None:
        levels = found.group(1).split("/")
        waves = tuple(n for n in (int(x) for x in levels[0].split("+")) if n > 0)
        return _Script(waves, "/".join(levels[1:]) or "0") if waves else None
    if not offered:
        return None
    digest = hashlib.sha256(f"{seed}\x00{task}\x00spawn".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    return _Script((rng.randint(6, 12), rng.randint(3, 6)), "0")


def _wave(task: str, script: _Script, wave: int, answers: list[tuple[str, str, str]]) -> dict[str, Any]:
    """The arguments of wave `wave`'s spawn (0-based): the first from the goal, later ones from the
    answers so far; the second returns at once (its ids), the others wait."""
    size = script.waves[wave]
    goal = _fold(_clean(task), GOAL_WIDTH)
    if wave == 0:
        prompts = [f"Part {n} of {size} of the goal: {goal} [[sim:spawn={script.below}]]" for n in range(1, size + 1)]
    else:
        done = [(agent_id, text) for agent_id, state, text in answers if state == "succeeded"] or [("-", goal)]
        prompts = [
            f"Follow-up {n} of {size} on {done[(n - 1) % len(done)][0]}: "
            f"{_fold(_clean(done[(n - 1) % len(done)][1]), 60)} [[sim:spawn=0]]"
            for n in range(1, size + 1)
        ]
    return {"tasks": [{"prompt": prompt} for prompt in prompts], "wait": wave != 1}


def _final(task: str, answers: list[tuple[str, str, str]], waves: int, refused: str | None) -> str:
    lines = [f"Sim orchestrator answer to: {_fold(_clean(task), 200)}"]
    if refused is not None:
        lines.append(f"spawn refused: {_fold(refused, 300)}")
    answered = sum(1 for _, state, _ in answers if state == "succeeded")
    lines.append(f"{answered} of {len(answers)} sub-agents answered, in {waves} wave{'s' if waves != 1 else ''}:")
    for agent_id, state, text in answers:
        said = _fold(_clean(text), QUOTE_WIDTH)
        lines.append(f"[{agent_id}] {said}" if state == "succeeded" else f"[{agent_id}] {state}: {said}")
    return "\n".join(lines)


# ------------------------------------------------------------------------- the conversation


def _swarm_calls(messages: Sequence[Any]) -> list[_Called]:
    """The swarm tools' calls of the conversation, in order, each with its result (None: none yet)."""
    called: dict[str, _Called] = {}
    order: list[_Called] = []
    for m in messages:
        if not isinstance(m, dict):
            continue
        if m.get("role") == "assistant":
            for call in m.get("tool_calls") or []:
                function = call.get("function") or {}
                name = function.get("name")
                if name not in SWARM_TOOLS:
                    continue
                try:
                    arguments = json.loads(function.get("arguments") or "{}")
                except json.JSONDecodeError:
                    arguments = {}
                entry = _Called(name, arguments if isinstance(arguments, dict) else {}, None)
                called[call.get("id") or ""] = entry
                order.append(entry)
        elif m.get("role") == "tool" and m.get("tool_call_id") in called:
            called[m["tool_call_id"]].result = content_text(m.get("content"))
    return order


def _answers(called: list[_Called]) -> list[tuple[str, str, str]]:
    """(id, state, answer or error) of every agent whose end a result reported, first report kept."""
    seen: dict[str, tuple[str, str, str]] = {}
    for c in called:
        for agent in _agents_of(c.result) or []:
            agent_id = str(agent.get("id"))
            state = str(agent.get("state"))
            if state == "running" or agent_id in seen:
                continue
            seen[agent_id] = (agent_id, state, str(agent.get("answer") or agent.get("error") or ""))
    return list(seen.values())


def _agents_of(result: str | None) -> list[dict[str, Any]] | None:
    if result is None:
        return None
    try:
        data = json.loads(result)
    except json.JSONDecodeError:
        return None
    agents = data.get("agents") if isinstance(data, dict) else None
    return [a for a in agents if isinstance(a, dict)] if isinstance(agents, list) else None


def _is_json(result: str) -> bool:
    try:
        return isinstance(json.loads(result), dict)
    except json.JSONDecodeError:
        return False


def _spawned_ids(result: str | None) -> list[str]:
    try:
        data = json.loads(result or "")
    except json.JSONDecodeError:
        return []
    spawned = data.get("spawned") if isinstance(data, dict) else None
    return [str(i) for i in spawned] if isinstance(spawned, list) else []


def _waited_after(called: list[_Called], spawn: _Called) -> bool:
    return any(c.name == WAIT for c in called[called.index(spawn) + 1 :])


def _clean(text: str) -> str:
    """Without any ``[[sim:...]]`` marker (a quote never scripts another agent)."""
    return _ANY_MARKER.sub("", text)


def _fold(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[:width] + "…"


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
