"""One agent in full: what it was asked, what it answered, every attempt it took, and (in a run
with a judge) the judge's score of its answer and the reason given.

Everything shown comes from the journal (the source of truth), re-read when the app says the
agent changed, so a retry started from here is seen through to its end; an attempt still in
flight is not journaled yet, so the run's view says which it is (`view.agents.InFlight`, from
its `AttemptStarted`) and the detail shows it with its elapsed time and the deadlines it runs
under, ticking once a second. Provider text (prompts, answers, error messages) is shown literally, never as markup,
and in full.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Collapsible, Static

from swarm_tui.core.events import TaskState
from swarm_tui.ui import format as fmt
from swarm_tui.ui.keys import bindings_for, key_hint
from swarm_tui.ui.widgets.footer.key_footer import KeyFooter
from swarm_tui.ui.widgets.grid.agent_grid import LOW_SCORE, STATE_LABELS
from swarm_tui.util import secrets
from swarm_tui.view.agents import InFlight
from swarm_tui.view.liveness import Reason, reason_of

if TYPE_CHECKING:
    from swarm_tui.frontend.source import RunSource
    from swarm_tui.ui.app import SwarmApp


def answer_of(result: dict[str, Any] | None) -> tuple[str, dict[str, Any] | None]:
    """(the answer's text, the raw chat.completion body) of a journaled result."""
    if not result or not result.get("ok"):
        return "", None
    body = result.get("response") or {}
    try:
        content = body["choices"][0]["message"].get("content") or ""
    except (KeyError, IndexError, TypeError, AttributeError):
        content = ""
    if not isinstance(content, str):  # a provider's list of parts, a number...
        content = json.dumps(content, ensure_ascii=False)
    return content, body


def messages_text(body: dict[str, Any]) -> Text:
    """The request's messages, each under its role; content as sent, but for a key of this process
    (a live agent's transcript is the engine's, unmasked: the journal masks what it keeps). An
    agent's transcript shows each step's tool calls (name and arguments) and each tool's result
    under its call id."""
    body = secrets.mask_value(body)
    text = Text()
    for message in body.get("messages", []):
        content = message.get("content")
        role = message.get("role", "?")
        if role == "tool":
            text.append(f"tool [{message.get('tool_call_id', '?')}]: ", "bold")
        else:
            text.append(f"{role}: ", "bold")
        if message.get("reasoning_content"):
            text.append(f"(thinking) {message['reasoning_content'].strip()}\n", "italic")
        if content is not None or not message.get("tool_calls"):
            text.append((content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)).strip())
        text.append("\n")
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            text.append(f"  → {function.get('name', '?')}", "bold")
            text.append(f"({function.get('arguments', '')}) [{call.get('id', '?')}]\n")
    return text


ATTEMPT_HEADER = " #  started   outcome   st  ms      error          in/out/cached      cost"


def deadlines_text(source: RunSource, elapsed_s: float) -> str:
    """The deadlines an attempt runs under (the engine guide's deadlines and backups), with what is left: what cuts it
    (`--timeout`; a stream's silences) and when a guess sends it a backup (never a cut)."""
    calls = source.settings.calls
    if calls.stream:
        first = min(calls.timeout_s, calls.first_token_timeout_s or calls.timeout_s)
        idle = f"{calls.idle_timeout_s:g}s" if calls.idle_timeout_s is not None else "none"
        parts = [
            f"first token within {first:g}s, then at most {idle} of silence between chunks (never cut for its length)"
        ]
    else:
        parts = [f"hard timeout {calls.timeout_s:g}s ({max(0.0, calls.timeout_s - elapsed_s):.0f}s left)"]
    straggler = source.straggler_s
    if straggler is not None:
        parts.append(f"a backup at {straggler:.1f}s (it keeps running; the first answer wins)")
    return "deadlines: " + "; ".join(parts)


def why_of(source: RunSource, index: int, state: TaskState, now: float) -> Reason:
    """Why agent `index` is where it is, from the run's view (`view.liveness.reason_of`)."""
    view = source.view
    facts = view.agents
    flying = facts.in_flight.get(index) if state is TaskState.RUNNING else None
    step = facts.step_of(index) if facts.stepping and state is TaskState.RUNNING else None
    return reason_of(
        view.liveness,
        index,
        state,
        in_flight_since=flying.started_at if flying is not None else None,
        hedged=flying is not None and flying.hedge,
        in_batch=facts.is_in_batch(index),
        tools=step[1] if step is not None else None,
        backup_s=source.straggler_s,
        now=now,
    )


class AgentDetailScreen(Screen[None]):
    """Enter on a grid cell opens this; `r` retries the agent, ←/→ step through agents."""

    DEFAULT_CSS = """
    AgentDetailScreen { background: $background; }
    AgentDetailScreen #detail-title { height: 1; background: $panel; padding: 0 1; text-style: bold; }
    AgentDetailScreen VerticalScroll { padding: 0 1; }
    AgentDetailScreen .section { color: $primary; text-style: bold; margin-top: 1; }
    AgentDetailScreen #detail-error { color: $error; }
    AgentDetailScreen #judge-title.-low { color: $warning; }
    AgentDetailScreen Collapsible { padding: 0; border: none; }
    """

    BINDINGS: ClassVar[list[BindingType]] = bindings_for("detail")

    def __init__(
        self,
        source: RunSource,
        index: int,
        in_flight: Mapping[int, InFlight] | None = None,
        wall_clock=time.time,
    ) -> None:
        """`in_flight`: the attempts in flight, by agent (default: the run view's)."""
        super().__init__()
        self.source = source
        self.index = index
        self._in_flight = in_flight if in_flight is not None else source.view.agents.in_flight
        self._wall_clock = wall_clock
        self._order = sorted(source.tasks)
        self._shown: tuple | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="detail-title", markup=False)
        with VerticalScroll():
            yield Static("", id="detail-why", markup=False)
            yield Static("", id="detail-family", markup=False)
            yield Static("Attempts", classes="section")
            yield Static("", id="detail-in-flight", markup=False)
            yield Static(id="detail-attempts", markup=False)
            yield Static("", id="detail-error", markup=False)
            yield Static("", classes="section", id="judge-title", markup=False)
            yield Static(id="detail-judge", markup=False)
            yield Static("Answer", classes="section", id="answer-title")
            yield Static(id="detail-answer", markup=False)
            with Collapsible(title="Raw response (chat.completion JSON)", id="detail-raw"):
                yield Static(id="detail-raw-json", markup=False)
            yield Static("Prompt (messages as sent)", classes="section")
            yield Static(id="detail-prompt", markup=False)
        yield KeyFooter()

    def on_mount(self) -> None:
        self.refresh_detail()

    def tick(self) -> None:
        """Once a second (the app's tick): the elapsed time of an attempt in flight. (A screen
        just pushed has no widgets until it is mounted: the drain's news waits for `on_mount`.)"""
        if self.is_mounted:
            self._fill_in_flight()

    # ----------------------------------------------------------------- data

    def agent_changed(self) -> None:
        """The app saw an event about this agent: re-read it from the journal (once mounted:
        `on_mount` reads it first)."""
        if self.is_mounted:
            self.refresh_detail()

    def refresh_detail(self) -> None:
        index = self.index
        task = self.source.task_of(index)  # as it stands now: an agent's body grows with its transcript
        if task is None:
            return
        state = self.source.states.get(index, TaskState.QUEUED)
        attempts = self.source.attempts_of(index)
        verdict = self._verdict(index)
        flying = self._in_flight.get(index) if not state.is_final else None
        family = self.source.view.family
        related = index in family.parent or index in family.children
        key = (
            index,
            state,
            len(attempts),
            len(task.body.get("messages", ())),
            verdict,
            flying,
            family.changed if related else 0,
        )
        if key == self._shown:
            return
        self._shown = key
        done = f"{len(attempts)} attempt{'' if len(attempts) == 1 else 's'} done"
        now = f"attempt {flying.number} in flight" if flying is not None else ""
        parts = (f"Agent {task.agent}", task.custom_id, STATE_LABELS[state].upper(), now, done)
        title = " · ".join(part for part in parts if part)
        if state is TaskState.FAILED and self.source.can_steer:
            title += f" · {key_hint(self.app, AgentDetailScreen, 'detail.retry')} retries it"
        self.query_one("#detail-title", Static).update(Text(title))
        self._fill_family(index)
        self._fill_in_flight()
        self._fill_attempts(attempts, waiting=flying is None and not state.is_final)
        try:
            result = self.source.result_of(index)
        except ValueError as exc:  # an answer journaled before answers were kept as strict JSON (a BOM...)
            result = {"ok": True, "response": {"unreadable": f"the journaled answer is not JSON: {exc}"}}
        content, body = answer_of(result)
        error = (result or {}).get("error") if result and not result.get("ok") else None
        final = self.query_one("#detail-error", Static)
        final.display = bool(error)
        if error:
            final.update(Text(f"Final error: {error.get('type')} {error.get('status') or ''}: {error.get('message')}"))
        self._fill_verdict(verdict)
        pretty = fmt.pretty_json(content) if content else None
        answer = self.query_one("#detail-answer", Static)
        checks = self.source.view.agents.checks_of(index) if state is TaskState.SUCCEEDED else ()
        parsed = (result or {}).get("parsed")
        if parsed is not None:  # the value the job's checks read (fences and prose left out)
            pretty = json.dumps(parsed, indent=2, ensure_ascii=False)
        title = "Answer (JSON, pretty-printed)" if pretty else "Answer"
        if checks:
            title = f"Answer: passed {', '.join(checks)}" + (" (the parsed value)" if parsed is not None else "")
        self.query_one("#answer-title", Static).update(title)
        answer.update(Text(pretty or content or ("(no answer yet)" if not state.is_final else "(no answer)")))
        raw = self.query_one("#detail-raw", Collapsible)
        raw.display = body is not None
        if body is not None:
            self.query_one("#detail-raw-json", Static).update(Text(json.dumps(body, indent=2, ensure_ascii=False)))
        self.query_one("#detail-prompt", Static).update(messages_text(task.body))
        self.refresh_bindings()

    def _fill_family(self, index: int) -> None:
        """An orchestrated agent's place: whose it is and its line up to the job's task; what it
        spawned, each spawn with its agents and how they stand (its transcript shows the calls)."""
        family = self.source.view.family
        line = self.query_one("#detail-family", Static)
        spawn = family.spawn_of(index)
        spawns = family.spawns_by(index)
        line.display = spawn is not None or bool(spawns)
        if not line.display:
            return
        text = Text()
        if spawn is not None:
            ancestry = " > ".join(str(i + 1) for i in [*family.ancestry(index), index])
            waited = "waited for" if spawn.wait else "not waited for (wait_agents)"
            text.append(
                f"Spawned by agent {spawn.parent + 1} at its step {spawn.step} ({waited}), depth {spawn.depth}; "
                f"its line: {ancestry}\n"
            )
        states = self.source.states
        for made, agents in spawns:
            counts: dict[str, int] = {}
            for agent in agents:
                label = STATE_LABELS[states.get(agent, TaskState.QUEUED)]
                counts[label] = counts.get(label, 0) + 1
            numbers = f"{agents[0] + 1}-{agents[-1] + 1}" if len(agents) > 1 else f"{agents[0] + 1}"
            how = ", ".join(f"{n} {label}" for label, n in counts.items())
            text.append(
                f"Step {made.step} spawned {len(agents)} agent{'s' if len(agents) != 1 else ''} ({numbers}): {how}\n"
            )
        text.rstrip()
        line.update(text)

    def _verdict(self, index: int) -> tuple[float, str] | None:
        """The judge's score and reason for this agent's answer (None: not judged)."""
        return self.source.view.figures.quality.judged.get(index)

    def _fill_verdict(self, verdict: tuple[float, str] | None) -> None:
        """The judge's verdict under the attempts; hidden for an answer not judged (most are not)."""
        title = self.query_one("#judge-title", Static)
        reason = self.query_one("#detail-judge", Static)
        title.display = reason.display = verdict is not None
        if verdict is None:
            return
        score, why = verdict
        low = score <= LOW_SCORE
        title.set_class(low, "-low")
        title.update(f"Judge: {score:g}/10" + (f" (low: {LOW_SCORE:g} or less)" if low else ""))
        reason.update(Text(why or "(the judge gave no reason)"))

    def _fill_in_flight(self) -> None:
        """Why the agent is where it is (and since when), then the attempt in flight: which, on
        which endpoint, for how long, under which deadlines."""
        line = self.query_one("#detail-in-flight", Static)
        state = self.source.states.get(self.index, TaskState.QUEUED)
        why_line = self.query_one("#detail-why", Static)
        why_line.display = not state.is_final  # a finished agent's attempts say it all
        if not state.is_final:
            why = why_of(self.source, self.index, state, self._wall_clock())
            since = f" (since {fmt.clock_time(why.since)})" if why.since is not None else ""
            why_line.update(Text(f"why: {why.text}{since}"))
        flying = self._in_flight.get(self.index) if not state.is_final else None
        line.display = flying is not None
        if flying is None:
            return
        elapsed = max(0.0, self._wall_clock() - flying.started_at)
        hedge = " (a hedge: a backup of a slow first call)" if flying.hedge else ""
        line.update(
            Text(
                f"attempt {flying.number} in flight on {flying.endpoint}{hedge}: {elapsed:.1f}s so far, started "
                f"{fmt.clock_time(flying.started_at)}\n{deadlines_text(self.source, elapsed)}"
            )
        )

    def _fill_attempts(self, attempts: list[dict[str, Any]], waiting: bool = False) -> None:
        """A fixed-width table (76 columns: fits 80x24), each attempt's message on its own line; in a
        routed run (or one whose attempts went to more than one endpoint), the endpoint each went to."""
        text = Text(no_wrap=False)
        text.append(ATTEMPT_HEADER + "\n", "bold")
        doors = self.source.view.endpoints
        name_doors = doors.routed or len({row["endpoint"] for row in attempts}) > 1  # which door took each
        for row in attempts:
            tokens = (
                f"{fmt.si(row['prompt_tokens']).strip()}/{fmt.si(row['completion_tokens']).strip()}/"
                f"{fmt.si(row['cached_tokens']).strip()}"
            )
            cost = row.get("cost_usd")
            billed = row["prompt_tokens"] + row["completion_tokens"]
            cost_text = f"${cost:.5f}" if cost is not None else ("unknown" if billed else "-")
            text.append(
                f"{row['number']:>2}  {fmt.clock_time(row['started_at'])}  {row['outcome']:<9}"
                f"{row['status'] or '-':>3} {fmt.ms(row['latency_ms'], 6):<8} "
                f"{(row.get('error_class') or ''):<15}{tokens:>14} {cost_text:>9}\n"
            )
            if name_doors:
                text.append(f"    on {row['endpoint']}\n", "dim")
            if row.get("error_message"):
                text.append(f"    {row['error_message']}\n", "italic")
        if not attempts:
            text.append("(no attempt done yet)" if not waiting else "(no attempt yet: waiting for a slot)")
        text.rstrip()
        self.query_one("#detail-attempts", Static).update(text)

    # ----------------------------------------------------------------- keys

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "retry_agent":
            failed = self.source.states.get(self.index) is TaskState.FAILED
            return True if failed and self.source.can_steer else None
        return True

    def action_retry_agent(self) -> None:
        app: SwarmApp = self.app  # type: ignore[assignment]
        app.steering.retry_subtree(self.index)  # (the agents it spawned too, when asked)
        self.refresh_detail()

    def action_step(self, delta: int) -> None:
        position = self._order.index(self.index) + delta
        if 0 <= position < len(self._order):
            self.index = self._order[position]
            self._shown = None
            self.refresh_detail()
            app: SwarmApp = self.app  # type: ignore[assignment]
            app.follow_cursor(self.index)
