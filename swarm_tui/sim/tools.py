"""The simulated model as a tool-calling agent: pure rules, no HTTP, no clock.

A request that offers ``tools`` (OpenAI function tools) with ``tool_choice`` other than
"none" is one step of an agent's loop. The simulator counts the tool rounds already in the
conversation (assistant messages carrying ``tool_calls``); while fewer than N happened it
answers with ``finish_reason: "tool_calls"``, after that it answers normally and quotes the
tool results it got.

The task
    An agent is identified by its *first user message* (the task; later turns append
    assistant and tool messages, never change it). Its token ``task_token`` is
    ``t-`` + the first 8 hex digits of SHA-256 of that message's text, so a test can
    compute which agent asked. Every choice below is seeded with (config seed, that text),
    so the same task makes the same choices whatever the interleaving or the retries.

N, the tool rounds before the final answer
    ``[[sim:tools=N]]`` in a user message scripts it (the first user message carrying one;
    N=0 answers at once); else a seeded draw in ``SimConfig.tool_rounds`` (default 1..4).
    ``tool_choice: "required"`` or a named function forces a tool call on every answer, as
    it does on a real model (the client's ``max_steps`` has to end the loop);
    ``tool_choice: "none"`` answers at once.

A tool-calling step (``choose_calls``)
    1 call (60%), 2 (25%) or 3 (15%); 1 when ``parallel_tool_calls`` is false. Each picks a
    tool from those offered (only the named one when ``tool_choice`` names one), with
    arguments filled from its JSON schema (``tool_arguments.py``: the task token in strings).
    ``content`` is null or a short thought. Ids are ``call_`` + 20 hex digits (the
    simulator's random run id and the request's number), never reused. Completion tokens
    are the estimate of the content plus each call's name and arguments; above
    ``max_tokens`` the step is cut there (``finish_reason`` "length", the last call's
    arguments cut short, later calls dropped).

The final answer
    When the conversation holds ``tool`` messages, the answer (with or without tools
    offered) is ``Sim answer to: <last user message[:200]>``, a newline, the line
    ``tool results: R1 | R2 | ...`` (each tool message's text in order, whitespace folded
    to single spaces, cut to 80 characters then ``…``), a newline and filler words. A JSON
    answer carries them as ``"tool_results": [...]`` instead. ``max_tokens`` cuts this
    answer like any other, so give an agent room for its quote.

Latency, faults (scripted and random 5xx, 429, hangs, stalls) and rate limits apply to a
tool-calling answer exactly as to any other: the tool decision is made after them.

Reasoning
    ``[[sim:reasoning]]`` in a user message, or ``SimConfig.reasoning`` (``--reasoning``),
    adds a ``reasoning_content`` (Kimi / DeepSeek's field) before every answer's content:
    in the message of a plain answer, as ``delta.reasoning_content`` chunks in a stream.
    Its tokens count in ``completion_tokens`` and in ``completion_tokens_details.reasoning_tokens``.

The request's ``tools`` and ``tool_choice`` are checked as OpenAI checks them (``tool_request.py``).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Sequence
from typing import Any

from swarm_tui.sim.tokens import content_text, estimate_tokens
from swarm_tui.sim.tool_arguments import schema_arguments
from swarm_tui.sim.tool_request import ToolSpec

__all__ = [
    "scripted_tokens",
    "first_user_text",
    "task_token",
    "directives",
    "rounds_done",
    "tool_results",
    "quote_results",
    "folded_results",
    "planned_rounds",
    "choose_calls",
    "thought",
    "reasoning_text",
    "fit_tool_answer",
    "split_arguments",
    "RESULT_WIDTH",
]

#: each quoted tool result is cut to this many characters
RESULT_WIDTH = 80

_TOOLS_MARKER = re.compile(r"\[\[sim:tools=(\d+)\]\]", re.IGNORECASE)
_REASONING_MARKER = "[[sim:reasoning]]"
_TOKENS_MARKER = re.compile(r"\[\[sim:tokens=(\d+)\]\]", re.IGNORECASE)


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


# --------------------------------------------------------------------------------------
# the conversation


def first_user_text(messages: Sequence[Any]) -> str:
    """The text of the first ``user`` message: the task ('' when there is none)."""
    for m in messages:
        if isinstance(m, dict) and m.get("role") == "user":
            return content_text(m.get("content"))
    return ""


def task_token(task: str) -> str:
    """``t-`` + 8 hex digits of SHA-256 of the task's text."""
    return "t-" + hashlib.sha256(task.encode("utf-8")).hexdigest()[:8]


def directives(messages: Sequence[Any]) -> tuple[int | None, bool]:
    """``(N of the first [[sim:tools=N]], whether [[sim:reasoning]] appears)`` in user messages."""
    rounds: int | None = None
    reasoning = False
    for m in messages:
        if not (isinstance(m, dict) and m.get("role") == "user"):
            continue
        text = content_text(m.get("content"))
        low = text.lower()
        if "[[sim:" not in low:
            continue
        if rounds is None:
            found = _TOOLS_MARKER.search(text)
            if found:
                rounds = int(found.group(1))
        if _REASONING_MARKER in low:
            reasoning = True
    return rounds, reasoning


def scripted_tokens(messages: Sequence[Any]) -> int | None:
    """N of the first ``[[sim:tokens=N]]`` in a user message: the answer is N tokens long (still cut
    at ``max_tokens``), so one job can mix short and long answers (with ``tokens_per_s``, long
    answers take long, as a model's do)."""
    for m in messages:
        if isinstance(m, dict) and m.get("role") == "user":
            text = content_text(m.get("content"))
            if "[[sim:" in text.lower() and (found := _TOKENS_MARKER.search(text)):
                return max(1, int(found.group(1)))
    return None


def rounds_done(messages: Sequence[Any]) -> int:
    """How many assistant messages carry ``tool_calls`` (tool rounds already taken)."""
    return sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant" and m.get("tool_calls"))


def tool_results(messages: Sequence[Any]) -> list[str]:
    """The text of every ``tool`` message, in order."""
    return [content_text(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") == "tool"]


def _fold(text: str, width: int = RESULT_WIDTH) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[:width] + "…"


def quote_results(results: Sequence[str]) -> str:
    """``tool results: R1 | R2 | ...``, each folded to one line and cut to 80 characters."""
    return "tool results: " + " | ".join(_fold(r) for r in results)


def folded_results(results: Sequence[str]) -> list[str]:
    return [_fold(r) for r in results]


# --------------------------------------------------------------------------------------
# seeded choices


def _rng(seed: int, task: str, *parts: object) -> random.Random:
    text = "\x00".join([str(seed), task, *map(str, parts)])
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def planned_rounds(seed: int, task: str, lo: int, hi: int) -> int:
    """The task's tool rounds when no marker scripts them: seeded, in ``lo..hi``."""
    return _rng(seed, task, "rounds").randint(lo, hi)


def choose_calls(
    seed: int, task: str, step: int, tools: Sequence[ToolSpec], *, parallel: bool = True, forced: str | None = None
) -> list[tuple[str, str]]:
    """The ``(name, arguments JSON)`` of the calls of tool round ``step`` (0-based)."""
    rng = _rng(seed, task, "step", step)
    u = rng.random()
    count = 1 if not parallel or u < 0.6 else 2 if u < 0.85 else 3
    candidates = [t for t in tools if t.name == forced] if forced else list(tools)
    token = task_token(task)
    calls = []
    for _ in range(count):
        spec = rng.choice(candidates)
        args = schema_arguments(spec.parameters, rng, token)
        calls.append((spec.name, _dumps(args)))
    return calls


def thought(seed: int, task: str, step: int, names: Sequence[str]) -> str | None:
    """A tool step's ``content``: null half the time, else a short thought."""
    rng = _rng(seed, task, "thought", step)
    if rng.random() < 0.5:
        return None
    return f"To answer {task_token(task)} I will call {', '.join(dict.fromkeys(names))}."


def reasoning_text(task: str, step: int, names: Sequence[str] | None, results: int) -> str:
    """The ``reasoning_content`` of an answer: what the step is about to do, and why."""
    head = f"Step {step + 1} of task {task_token(task)}: {' '.join(task.split())[:80]}."
    if names:
        return f"{head} I do not know enough yet; I should call {', '.join(names)} and read the results."
    if results:
        return f"{head} I have {results} tool result(s); that is enough to write the answer, quoting them."
    return f"{head} I can answer this directly."


# --------------------------------------------------------------------------------------
# arguments from a JSON schema


# --------------------------------------------------------------------------------------
# the tool-calling answer


def fit_tool_answer(
    content: str | None, calls: list[tuple[str, str]], max_tokens: int | None
) -> tuple[str | None, list[tuple[str, str]], int, str]:
    """``(content, calls, completion_tokens, finish_reason)`` of a tool step.

    Its completion tokens are the estimate of the content and every call's name and
    arguments together. Beyond ``max_tokens`` the answer is cut there, in order (content,
    then each call's name and arguments, the last one's arguments cut short and no longer
    valid JSON, later calls dropped) with ``finish_reason`` "length", as a real model's is.
    """
    text = (content or "") + "".join(n + a for n, a in calls)
    tokens = estimate_tokens(text)
    if max_tokens is None or tokens <= max_tokens:
        return content, calls, tokens, "tool_calls"
    room = max_tokens * 4

    def take(s: str) -> str:
        nonlocal room
        raw = s.encode("utf-8")[: max(room, 0)]
        room -= len(raw)
        return raw.decode("utf-8", "ignore")

    cut_content = take(content) if content else content
    kept: list[tuple[str, str]] = []
    for name, args in calls:
        if room < len(name.encode("utf-8")):
            break
        kept.append((take(name), take(args)))
    text = (cut_content or "") + "".join(n + a for n, a in kept)
    return cut_content, kept, estimate_tokens(text), "length"


def split_arguments(arguments: str, size: int = 8) -> list[str]:
    """Stream pieces of a call's arguments (they join back to it)."""
    return [arguments[i : i + size] for i in range(0, len(arguments), size)]
