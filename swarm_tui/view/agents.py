"""What a view knows of each agent besides its state: the step a multi-step agent is on and the
tools it runs, a batch line waiting, an answer replayed from the response cache, the judge's
score, the latency of its answer, the attempt in flight now and the last agent that failed. No
Textual: the grid draws its cells from these, the run panel counts them, an agent's detail reads
its attempt in flight.

Every update is O(1) (the view calls them per event); reads are O(1) too, except the counts,
which are the sizes of small dicts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from swarm_tui.core.events import TaskState

STATES: tuple[TaskState, ...] = (
    TaskState.QUEUED,
    TaskState.RUNNING,
    TaskState.RETRYING,
    TaskState.SUCCEEDED,
    TaskState.FAILED,
    TaskState.CANCELLED,
)
STATE_LABELS = {
    TaskState.QUEUED: "queued",
    TaskState.RUNNING: "running",
    TaskState.RETRYING: "retrying",
    TaskState.SUCCEEDED: "done",
    TaskState.FAILED: "failed",
    TaskState.CANCELLED: "cancelled",
}
"""A state as a person reads it (the grid's legend, a key's "why not", the detail's title)."""


@dataclass(frozen=True, slots=True)
class InFlight:
    """An agent's attempt in flight: what its `AttemptStarted` said, and when (epoch seconds)."""

    number: int
    endpoint: str
    started_at: float
    hedge: bool = False


class AgentFacts:
    """The per-agent facts of a run, kept from its events by `RunView`."""

    def __init__(self) -> None:
        self.latency: dict[int, float] = {}
        """The latency (ms) of each agent's answer."""
        self._stepped: dict[int, int] = {}
        """Multi-step agents: the last step whose model call asked for tools."""
        self._in_tools: dict[int, tuple[str, ...]] = {}
        """Agents running their tools now (from `AgentStepped` to their next model call): the tools' names."""
        self.stepping = False
        """An agent has taken a step: cells show steps (never true for a job without tools)."""
        self._in_batch: set[int] = set()
        """Tasks whose attempt is a line of a provider batch not back yet (`BatchSubmitted`)."""
        self.batching = False
        """A batch was submitted in this run: the legend shows the batch colour (never true for a live run)."""
        self._from_cache: set[int] = set()
        """Done agents whose answer was replayed from the response cache (`--cache`): nothing was sent."""
        self.caching = False
        """An answer of this run came from the cache: the legend shows the cached colour (never
        true without `--cache`)."""
        self._scores: dict[int, float] = {}
        """The judge's score of each judged answer (`AnswerJudged`)."""
        self.in_flight: dict[int, InFlight] = {}
        """Each agent's attempt in flight now (the last started: a hedge replaces its first call)."""
        self.last_failed: int | None = None
        """The last agent that failed for good (the grid's cursor follows failures to it)."""
        self._reasking: set[int] = set()
        """Agents whose answer could not be used and is being asked again (given more room, or
        sent to the escalation endpoint), until they end."""
        self._checks: dict[int, tuple[str, ...]] = {}
        """The checks each done agent's answer passed (`TaskSucceeded.checks`)."""

    # Multi-step agents.

    def agent_stepped(self, index: int, step: int, tools: tuple[str, ...]) -> None:
        """`AgentStepped`: step `step`'s model call asked for `tools`; the agent runs them now."""
        self._stepped[index] = max(step, self._stepped.get(index, 0))
        self._in_tools[index] = tools
        self.stepping = True

    def tool_call_ended(self, index: int, step: int) -> None:
        """`ToolCallEnded`: the agent is at step `step` at least (tools owed since a stop run
        without a new `AgentStepped`)."""
        if step > self._stepped.get(index, 0):
            self._stepped[index] = step
            self.stepping = True

    def left_tools(self, index: int) -> None:
        """Its next model call started (`AttemptStarted`: it thinks), or it stopped running."""
        self._in_tools.pop(index, None)

    def step_of(self, index: int) -> tuple[int, tuple[str, ...] | None] | None:
        """The step a multi-step agent is on and, while it runs them, its tools' names (None:
        it is thinking); None for an agent that has taken no step."""
        stepped = self._stepped.get(index)
        if stepped is None:
            return None
        tools = self._in_tools.get(index)
        return (stepped, tools) if tools is not None else (stepped + 1, None)

    @property
    def in_tools(self) -> int:
        """How many agents run their tools now."""
        return len(self._in_tools)

    # The batch lane.

    def batch_submitted(self, indices: Sequence[int]) -> None:
        """`BatchSubmitted`: these tasks wait as lines of a provider batch."""
        self._in_batch.update(indices)
        self.batching = True

    def left_batch(self, index: int) -> None:
        """Its line came back (or it was cancelled, queued again, started live): no longer waiting."""
        self._in_batch.discard(index)

    def is_in_batch(self, index: int) -> bool:
        return index in self._in_batch

    @property
    def in_batch(self) -> int:
        """How many tasks wait as batch lines now."""
        return len(self._in_batch)

    # The response cache.

    def replayed(self, index: int) -> None:
        """`TaskSucceeded` of lane `cache`: its answer came from the response cache."""
        self._from_cache.add(index)
        self.latency.pop(index, None)  # an earlier call's, if it was queued again: not this answer's
        self.caching = True

    def is_from_cache(self, index: int) -> bool:
        return index in self._from_cache

    @property
    def from_cache(self) -> int:
        """How many done agents' answers were replayed from the cache."""
        return len(self._from_cache)

    # The judge.

    def judged(self, index: int, score: float) -> None:
        """`AnswerJudged`: the judge scored this agent's answer."""
        self._scores[index] = score

    def score_of(self, index: int) -> float | None:
        return self._scores.get(index)

    @property
    def judging(self) -> bool:
        """An answer of this run was judged: the legend shows the judged cells (never true without a judge)."""
        return bool(self._scores)

    # The answer checks.

    def reasking(self, index: int) -> None:
        """`TaskRetrying` of an unusable answer: the agent is asked again (not a transport retry)."""
        self._reasking.add(index)

    def is_reasking(self, index: int) -> bool:
        return index in self._reasking

    def checked(self, index: int, checks: tuple[str, ...]) -> None:
        """`TaskSucceeded`: the checks its answer passed."""
        if checks:
            self._checks[index] = checks

    def checks_of(self, index: int) -> tuple[str, ...]:
        """The checks a done agent's answer passed (none: the job checks nothing)."""
        return self._checks.get(index, ())

    # What an agent does now.

    def set_latency(self, index: int, latency_ms: float) -> None:
        self.latency[index] = latency_ms

    def started(self, index: int, flight: InFlight) -> None:
        """Its model call started (a first call, a retry, a hedge, the next step's)."""
        self.in_flight[index] = flight
        self._in_tools.pop(index, None)
        self._in_batch.discard(index)

    def stopped(self, index: int) -> None:
        """Its call ended, or it left the running states (done, failed, cancelled, queued again):
        whatever it was doing, and an earlier answer's replay (a task queued again answers anew)."""
        self.in_flight.pop(index, None)
        self._in_tools.pop(index, None)
        self._in_batch.discard(index)
        self._from_cache.discard(index)
        self._reasking.discard(index)
