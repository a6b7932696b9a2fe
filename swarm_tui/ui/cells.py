"""What a grid cell shows of its agent, besides its state: the glyphs, the step marks, and the
per-agent facts the events bring (its step and tools, a batch line waiting, the judge's score,
its latency). No Textual: the grid (`grid.py`) draws from these, the run panel and the detail
read them. Every update is O(1): the app calls them per event, then redraws the rows changed.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..engine import TaskState

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
GLYPHS = {
    TaskState.QUEUED: ".",
    TaskState.RUNNING: ">",
    TaskState.RETRYING: "~",
    TaskState.SUCCEEDED: "o",
    TaskState.FAILED: "x",
    TaskState.CANCELLED: "-",
}
"""Every cell's state, in its text: ASCII, so that no terminal (CJK ambiguous-width ones included) widens them."""
TOOL_GLYPH = "*"
"""A cell whose agent runs its tools (`>`: it is thinking); a numbered one shows its step instead."""
BATCH_GLYPH = "="
"""A cell whose task waits as a line of a provider batch."""
LOW_GLYPH = "!"
"""A cell whose answer the judge scored low."""
LOW_SCORE = 5.0
"""A judged answer scored at or below this is low (the default rubric: 5 is "usable with edits")."""
THINKING_MARK = ":"
TOOL_MARK = "*"
RETRY_MARK = "~"
"""Between the number and the step in a wide cell: `42:3` thinking, `42*3` in its tools, `42~3`
waiting out a backoff."""
MANY_STEPS = "+"
"""The step where its digits do not fit (step 10 and later)."""
STEP_STATES = frozenset({TaskState.RUNNING, TaskState.RETRYING})
"""The states whose cells show the agent's step."""


class CellFacts:
    """The per-agent facts the grid's cells show; `AgentGrid` is one (a mixin: `__init__` first)."""

    def __init__(self) -> None:
        self._latency: dict[int, float] = {}
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
        self._scores: dict[int, float] = {}
        """The judge's score of each judged answer (`AnswerJudged`)."""

    # Multi-step agents. Each call is O(1): the app calls them per event, then `update_cells`.

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

    # The batch lane. O(1) per task, like the steps above.

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

    # The judge. O(1) per verdict.

    def judged(self, index: int, score: float) -> None:
        """`AnswerJudged`: the judge scored this agent's answer."""
        self._scores[index] = score

    def score_of(self, index: int) -> float | None:
        return self._scores.get(index)

    @property
    def judging(self) -> bool:
        """An answer of this run was judged: the legend shows the judged cells (never true without a judge)."""
        return bool(self._scores)

    def set_latency(self, index: int, latency_ms: float) -> None:
        self._latency[index] = latency_ms
