"""What the engine's agents ask of the run's tools (`AgentTools`): which tools an agent is offered,
and a tool call run to its outcome. Two implement it: the job's `Toolbox` (MCP servers and Python
functions, the same for every agent) and the orchestrator's `SwarmTools` (the job's tools plus
the built-in swarm tools, offered by each agent's depth).

A call is given its place in its agent's transcript (`CallSite`): a tool whose effect must happen
once (a spawn) keys it on that place, which a resumed run that runs the call again finds the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from swarm_tui.tools.toolbox import ToolOutcome


@dataclass(frozen=True, slots=True)
class CallSite:
    """Where a tool call stands: its agent's step and its place among the step's calls (the same in
    every session, as the journaled transcript says), and the model's id of it."""

    step: int
    position: int
    call_id: str


class AgentTools(Protocol):
    @property
    def max_steps(self) -> int:
        """Model calls that ask for tools an agent may make; past them it fails as `max_steps`."""

    def offered_to(self, agent: int) -> list[dict[str, Any]]:
        """The `tools` of agent `agent`'s requests, in the OpenAI function format (its body's own,
        when it names some, win: the engine offers these to a body that names none)."""

    async def call(self, name: str, arguments: str, caller: int = 0, *, site: CallSite | None = None) -> ToolOutcome:
        """Run one call to its outcome (never raises: a failure is the model's to read). `caller`:
        the agent's task index; `site`: where the call stands in its transcript."""
