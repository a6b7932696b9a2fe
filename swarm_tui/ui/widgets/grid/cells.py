"""What a grid cell shows of its agent: its state's glyph, the step marks of a multi-step agent,
the batch line's, the cache replay's and the low score's glyphs. No Textual: the grid
(`agent_grid.py`) draws with these, the run panel's legend too; the facts they show (step, tools,
batch line, cache replay, score) are the view's (`view.agents.AgentFacts`).
"""

from __future__ import annotations

from swarm_tui.core.events import TaskState
from swarm_tui.view.agents import STATE_LABELS, STATES

__all__ = [
    "BATCH_GLYPH",
    "CACHED_GLYPH",
    "DEPTH_MARKS",
    "GLYPHS",
    "KIND_GLYPHS",
    "LOW_GLYPH",
    "LOW_SCORE",
    "MANY_STEPS",
    "REASK_GLYPH",
    "SILENT_GLYPH",
    "RETRY_MARK",
    "STATES",
    "STATE_LABELS",
    "STEP_STATES",
    "THINKING_MARK",
    "TOOL_GLYPH",
    "TOOL_MARK",
]
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
CACHED_GLYPH = "c"
"""A done cell whose answer was replayed from the response cache (`--cache`): nothing was sent."""
LOW_GLYPH = "!"
"""A cell whose answer the judge scored low."""
SILENT_GLYPH = "?"
"""A cell whose agent's call has been silent far longer than its like takes (not cut: said)."""
REASK_GLYPH = "&"
"""A cell whose answer could not be used and is being asked again (re-asking: the reason sent back,
more room, or the escalation endpoint); in the retrying colour."""
KIND_GLYPHS: dict[object, str] = {
    "silent": SILENT_GLYPH,
    "reasking": REASK_GLYPH,
    "batch": BATCH_GLYPH,
    "tool": TOOL_GLYPH,
    "low-score": LOW_GLYPH,
    "cached": CACHED_GLYPH,
}
"""The glyph of a cell whose kind (the grid's style key for it) says more than its state."""
LOW_SCORE = 5.0
"""A judged answer scored at or below this is low (the default rubric: 5 is "usable with edits")."""
THINKING_MARK = ":"
TOOL_MARK = "*"
RETRY_MARK = "~"
"""Between the number and the step in a wide cell: `42:3` thinking, `42*3` in its tools, `42~3`
waiting out a backoff."""
MANY_STEPS = "+"
"""The step where its digits do not fit (step 10 and later)."""
DEPTH_MARKS = ("", "'", '"')
"""Between the glyph and the number of a spawned agent's cell, where there is room: `o'42` an
orchestrator's sub-agent (depth 1), `o"57` one of theirs (depth 2 or deeper); the grid shows
each under its parent. ASCII, as the glyphs."""
STEP_STATES = frozenset({TaskState.RUNNING, TaskState.RETRYING})
"""The states whose cells show the agent's step."""
