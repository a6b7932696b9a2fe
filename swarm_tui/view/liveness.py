"""Where each agent stands and why, as the events tell it: what the line waits for, the run's
suspension, the streams and their tokens, the calls flagged silent, the backoffs and the tools
running. No Textual: the console's detail and run panel, the attached view and the headless log
all read `reason_of` and `reason_counts` of the same `RunView`.

A reason is a state's why and since when:

* queued — its place in line (about, from the highest index started: tasks go in index order) and
  what the line waits for (`DispatchWaiting`: a slot, the RPM or TPM bucket, the provider's
  Retry-After gate, the budget's room, the gentle start, a pause, a suspension);
* backing off — until when, after which error;
* running — in a provider batch; in a tool (which, for how long); a call on the wire: waiting for
  its answer (a plain call) or for its first token (a stream), then streaming (tokens so far,
  tokens a second), flagged silent (for how long, where how long was expected), hedged (a backup
  runs beside it);
* suspended — the run holds: quota spent, or a wait the provider asked for past the cap.

Each update is O(1) per event; `reason_counts` walks the calls on the wire and the few dicts here
(never the tasks), so the run panel can count by reason at every repaint of a million-task run.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from swarm_tui.core.events import AgentSilent, CallProgress, DispatchWaiting, RunSuspended, TaskState

WAITING_LABELS = {
    "slot": "a slot",
    "rpm": "RPM",
    "tpm": "TPM",
    "gate": "Retry-After",
    "budget": "budget",
    "ramp": "gentle start",
    "first_word": "first answer",
    "paused": "paused",
    "suspended": "suspended",
}
"""What the line waits for, in the run panel's short words."""

WAITING_TEXTS = {
    "slot": "a slot of the in-flight limit",
    "rpm": "the RPM bucket",
    "tpm": "the TPM bucket",
    "gate": "the provider's Retry-After gate",
    "budget": "room in the budget",
    "ramp": "the gentle start (a limit not stated: the window grows with each clean answer)",
    "first_word": "the first answer (it may state the provider's limits)",
    "paused": "the run to be resumed (paused)",
    "suspended": "the provider to serve the account again (suspended)",
}


@dataclass(frozen=True, slots=True)
class Stream:
    """A streamed call that has begun to answer."""

    number: int
    first_at: float
    """Epoch seconds of its first token."""
    tokens: int
    tokens_per_s: float | None
    told_at: float


@dataclass(frozen=True, slots=True)
class Silence:
    """A call flagged silent far past what was expected (`AgentSilent`)."""

    number: int
    silent_s: float
    expected_s: float | None
    streaming: bool
    at: float
    """Epoch seconds of the flag: the silence has lasted `silent_s` + (now - at)."""

    def lasted_s(self, now: float) -> float:
        return self.silent_s + max(0.0, now - self.at)


@dataclass(frozen=True, slots=True)
class Reason:
    """Why an agent is where it is, and since when (epoch seconds; None: not known)."""

    code: str
    text: str
    since: float | None = None


class LivenessView:
    """The facts of where agents stand beyond their state, kept from the events (see the module)."""

    def __init__(self) -> None:
        self.waiting: DispatchWaiting | None = None
        self.waiting_at = 0.0
        self.suspension: RunSuspended | None = None
        self.suspended_at = 0.0
        self.streams: dict[int, Stream] = {}
        self.silent: dict[int, Silence] = {}
        self.backoff_until: dict[int, tuple[float, str]] = {}
        """Agents waiting out a backoff: when it ends (epoch seconds) and after which error."""
        self.tools_since: dict[int, float] = {}
        self.highest_started = -1
        """The highest index an attempt was made of: the line's front, for a queued agent's place."""
        self.streaming_run = False
        """The run streams its calls (a call on the wire waits for its first token, not its answer)."""

    # ----------------------------------------------------------------- the events

    def dispatch_waiting(self, event: DispatchWaiting, at: float) -> None:
        self.waiting = event if event.reason else None
        self.waiting_at = at

    def suspended(self, event: RunSuspended, at: float) -> None:
        self.suspension, self.suspended_at = event, at

    def unsuspended(self) -> None:
        self.suspension = None

    def progress(self, event: CallProgress, at: float) -> None:
        known = self.streams.get(event.index)
        first_at = known.first_at if known is not None and known.number == event.number else at
        self.streams[event.index] = Stream(event.number, first_at, event.tokens, event.tokens_per_s, at)
        self.silent.pop(event.index, None)  # it speaks

    def flagged(self, event: AgentSilent, at: float) -> None:
        self.silent[event.index] = Silence(event.number, event.silent_s, event.expected_s, event.streaming, at)

    def started(self, index: int) -> None:
        """A call of it went out: whatever it waited for is over."""
        self.ended(index)
        if index > self.highest_started:
            self.highest_started = index

    def backing_off(self, index: int, until: float, why: str) -> None:
        self.ended(index)
        self.backoff_until[index] = (until, why)

    def in_tools(self, index: int, at: float) -> None:
        self.ended(index)
        self.tools_since[index] = at

    def ended(self, index: int) -> None:
        """Its call ended, or it left the running states: its stream, silence, backoff, tools are over."""
        self.streams.pop(index, None)
        self.silent.pop(index, None)
        self.backoff_until.pop(index, None)
        self.tools_since.pop(index, None)

    # ----------------------------------------------------------------- reading

    def waiting_text(self, now: float) -> str:
        """What the line waits for, in a sentence ("" while nothing holds it)."""
        waiting = self.waiting
        if waiting is None:
            return ""
        text = WAITING_TEXTS.get(waiting.reason, waiting.reason)
        if waiting.wait_s is not None and waiting.reason in ("gate", "rpm", "tpm"):
            left = waiting.wait_s - (now - self.waiting_at)
            if left > 0.05:
                text += f", {left:.1f}s left"
        return text + (f" ({waiting.detail})" if waiting.detail else "")


def queued_reason(live: LivenessView, index: int, now: float) -> Reason:
    ahead = index - live.highest_started - 1
    place = f"about {ahead:,} ahead" if ahead > 0 else "next in line"
    if live.suspension is not None:
        return Reason("suspended", f"queued ({place}); {suspension_text(live.suspension)}", live.suspended_at)
    waits = live.waiting_text(now)
    if waits:
        return Reason("waiting", f"queued ({place}): the line waits for {waits}", live.waiting_at)
    return Reason("queued", f"queued ({place})")


def suspension_text(event: RunSuspended) -> str:
    what = "quota or spend limit spent" if event.kind == "quota" else "the provider asked for a long wait"
    every = f", a probe every {event.probe_every_s:g}s or more" if event.probe_every_s else ""
    return f"the run is suspended ({what}: {event.reason}{every})"


def reason_of(
    live: LivenessView,
    index: int,
    state: TaskState,
    *,
    in_flight_since: float | None = None,
    hedged: bool = False,
    in_batch: bool = False,
    tools: tuple[str, ...] | None = None,
    backup_s: float | None = None,
    now: float | None = None,
) -> Reason:
    """Why agent `index` is where it is now (its state, and what the view knows of its call:
    `in_flight_since` its call's start, `hedged` a backup runs beside it, `in_batch`, `tools` the
    tools it runs; `backup_s` when a call like it gets a backup, when the caller knows)."""
    now = time.time() if now is None else now
    if state is TaskState.SUCCEEDED:
        return Reason("done", "done")
    if state is TaskState.FAILED:
        return Reason("failed", "failed")
    if state is TaskState.CANCELLED:
        return Reason("cancelled", "cancelled: waits for a retry or a resume")
    if state is TaskState.QUEUED:
        return queued_reason(live, index, now)
    if state is TaskState.RETRYING:
        backoff = live.backoff_until.get(index)
        if backoff is not None and backoff[0] > now:
            until, why = backoff
            return Reason(
                "backoff",
                f"backing off until {time.strftime('%H:%M:%S', time.localtime(until))} "
                f"({until - now:.1f}s left) after {why}",
            )
        waiting = queued_reason(live, index, now)
        return Reason(waiting.code, "retry due, " + waiting.text, waiting.since)
    if in_batch:
        return Reason("batch", "in a provider batch: its line waits for the batch to end")
    since = live.tools_since.get(index)
    if tools is not None:
        names = ", ".join(dict.fromkeys(tools)) or "its tools"
        took = f" for {now - since:.1f}s" if since is not None else ""
        return Reason("tools", f"in a tool: {names}{took}", since)
    if in_flight_since is None:
        return Reason("running", "running")
    elapsed = max(0.0, now - in_flight_since)
    backup = "; hedged: a backup runs beside it, the first answer wins" if hedged else ""
    silence = live.silent.get(index)
    if silence is not None:
        lasted = silence.lasted_s(now)
        expected = f", where {silence.expected_s:.1f}s was expected" if silence.expected_s is not None else ""
        what = "no next chunk" if silence.streaming else "no word"
        return Reason("silent", f"silent: {what} for {lasted:.0f}s{expected}{backup}", in_flight_since)
    stream = live.streams.get(index)
    if stream is not None:
        rate = f", {stream.tokens_per_s:.0f} tokens/s" if stream.tokens_per_s else ""
        return Reason(
            "streaming",
            f"streaming: {stream.tokens:,} tokens so far{rate} (for {now - stream.first_at:.1f}s){backup}",
            stream.first_at,
        )
    expect = f", a backup at {backup_s:.1f}s if none yet" if backup_s is not None and not hedged else ""
    what = "waiting for its first token" if live.streaming_run else "waiting for its answer"
    code = "hedged" if hedged else "first_token" if live.streaming_run else "answer"
    return Reason(code, f"{what}: {elapsed:.1f}s so far{expect}{backup}", in_flight_since)


def reason_counts(
    live: LivenessView, counts: Mapping[TaskState, int], in_flight: int, in_tools: int, in_batch: int, now: float
) -> list[tuple[str, int, str]]:
    """The agents counted by why (code, count, words), biggest matters first: "12 waiting: RPM",
    "3 streaming", "1 silent 40s". `counts`: the tasks by state; `in_flight` the tasks with a call
    on the wire (a hedged backup is no agent more: `RunStats.in_flight_tasks`)."""
    out: list[tuple[str, int, str]] = []
    queued = counts.get(TaskState.QUEUED, 0)
    retrying = counts.get(TaskState.RETRYING, 0)
    backing = sum(1 for until, _ in live.backoff_until.values() if until > now)
    due = max(0, retrying - backing)
    if live.suspension is not None and queued + due:
        out.append(("suspended", queued + due, "suspended"))
    elif live.waiting is not None and queued + due:
        out.append(
            ("waiting", queued + due, f"waiting: {WAITING_LABELS.get(live.waiting.reason, live.waiting.reason)}")
        )
    elif queued + due:
        out.append(("queued", queued + due, "queued"))
    if backing:
        out.append(("backoff", backing, "backing off"))
    silent = len(live.silent)
    streaming = sum(1 for index in live.streams if index not in live.silent)
    answering = max(0, in_flight - streaming - silent)
    if answering:
        out.append(("answer", answering, "awaiting first token" if live.streaming_run else "awaiting answer"))
    if streaming:
        out.append(("streaming", streaming, "streaming"))
    if in_tools:
        out.append(("tools", in_tools, "in tools"))
    if in_batch:
        out.append(("batch", in_batch, "in batch"))
    if silent:
        longest = max(s.lasted_s(now) for s in live.silent.values())
        out.append(("silent", silent, f"silent {longest:.0f}s"))
    return out


def counts_line(counts: list[tuple[str, int, str]]) -> str:
    """`12 waiting: RPM · 3 streaming · 1 silent 40s`."""
    return " · ".join(f"{n:,} {words}" for _, n, words in counts)
