"""The words of an answer: plain text, JSON, a planner's plan, and the pieces a stream sends.

``Sim answer to: <last user message, first 200 chars>`` then deterministic filler words up to the
drawn length (uniform in ``output_tokens``), cut at ``max_tokens`` / ``max_completion_tokens``
with ``finish_reason`` "length". Every task answer ends with its quality mark `` ⟨qN⟩`` (see
``judging.py``; a JSON answer ends its ``"answer"`` string with it), kept when ``max_tokens``
cuts the answer if it fits; plans, tool-calling steps and judge verdicts carry none.
The filler is a fixed word stream, so an answer is the same in every version of the simulator.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from swarm_tui.sim.tokens import estimate_tokens

__all__ = ["build_answer", "build_json_answer", "planned_subtasks", "wants_json", "split_pieces"]

_WORDS = (
    "the swarm agent considered task context and returned a concise result with notes on "
    "scope risk evidence method cost latency tokens cache retry backoff plan summary data "
    "signal model review check draft outline step finding source metric value detail "
    "baseline variance trend option choice reason answer next item list point case test "
    "result review final"
).split()


def _make_filler(n_words: int = 2048) -> tuple[str, list[int]]:
    # A fixed pseudo-random word stream (an LCG, so it never changes between versions).
    words, state = [], 12345
    for _ in range(n_words):
        state = (state * 1103515245 + 12345) & 0x7FFFFFFF
        words.append(_WORDS[state % len(_WORDS)])
    text = " ".join(words)
    starts, pos = [], 0
    for w in words:
        starts.append(pos)
        pos += len(w) + 1
    return text, starts


_FILLER, _FILLER_STARTS = _make_filler()
_PREFIX = "Sim answer to: "


def _filler(u: float, nbytes: int) -> str:
    """At most ``nbytes`` bytes of whole filler words, starting at a drawn word."""
    start = _FILLER_STARTS[int(u * len(_FILLER_STARTS)) % len(_FILLER_STARTS)]
    src = _FILLER[start:]
    while len(src) <= nbytes:  # wrap around for very long answers
        src += " " + _FILLER
    out = src[:nbytes]
    if src[nbytes] != " ":  # do not end mid-word
        cut = out.rfind(" ")
        if cut > 0:
            out = out[:cut]
    return out.rstrip()


def build_answer(
    prompt: str,
    target_tokens: int,
    u_filler: float,
    max_tokens: int | None,
    extra: str | None = None,
    tail: str = "",
) -> tuple[str, int, str]:
    """The answer ``(content, completion_tokens, finish_reason)``.

    ``content`` starts with ``Sim answer to: <prompt[:200]>`` so every request's answer
    names its request; ``extra`` (an agent's ``tool results: ...`` line, a drifting answer's
    confusion) follows on its own line; filler words bring it near ``target_tokens`` (after a
    newline when ``extra`` is given); ``tail`` (the quality mark) ends it. When the content
    would exceed ``max_tokens`` it is cut there, the tail kept when it fits, and
    ``finish_reason`` is "length". ``completion_tokens == estimate_tokens(content)`` always.
    """
    head = _PREFIX + prompt[:200]
    sep = " "
    if extra:
        head, sep = head + "\n" + extra, "\n"
    head_bytes = len(head) if head.isascii() else len(head.encode("utf-8"))
    tail_bytes = len(tail.encode("utf-8"))
    room = target_tokens * 4 - head_bytes - 1 - tail_bytes
    if room >= 2:
        content = head + sep + _filler(u_filler, room)
    else:
        content = head
        if extra and tail:  # no filler: the mark goes on its own line, not onto the extra one
            tail = "\n" + tail.lstrip()
            tail_bytes = len(tail.encode("utf-8"))
    n = estimate_tokens(content + tail)
    if max_tokens is not None and n > max_tokens:
        limit = max_tokens * 4
        if tail and tail_bytes < limit:
            limit -= tail_bytes
        else:
            tail = ""
        content = content.encode("utf-8")[:limit].decode("utf-8", "ignore") + tail
        return content, estimate_tokens(content), "length"
    return content + tail, n, "stop"


_PLAN_REQUEST = re.compile(r"Split the goal into (\d+) sub-tasks")
_GOAL = re.compile(r"Goal:\s*(.+)")


def planned_subtasks(prompt: str) -> int | None:
    """How many sub-tasks a planner request (swarm_tui.swarm.planner's wording) asks for."""
    m = _PLAN_REQUEST.search(prompt)
    return int(m.group(1)) if m else None


def wants_json(body: dict) -> bool:
    fmt = body.get("response_format")
    return isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema")


def build_json_answer(
    prompt: str,
    u: float,
    plan_size: int | None,
    broken: bool,
    tool_results: Sequence[str] | None = None,
    note: str | None = None,
    tail: str = "",
) -> str:
    """A JSON answer: a plan (`{"subtasks": [...]}`) for a planner request, else an object
    naming the request (with `"tool_results"` when given: an agent's quoted tool results);
    its `"answer"` string ends with `note` (a drifting answer's confusion) and `tail` (the
    quality mark). `broken` wraps it in prose and a fence and cuts it short, as models do."""
    if plan_size:
        goal_match = _GOAL.search(prompt)
        goal = (goal_match.group(1) if goal_match else prompt).strip()[:80]
        angles = (
            "prior work",
            "data sources",
            "risks",
            "costs",
            "open questions",
            "metrics",
            "alternatives",
            "edge cases",
            "timeline",
            "stakeholders",
        )
        value: Any = {
            "subtasks": [
                f"Sub-task {i + 1} of {plan_size}: study the {angles[i % len(angles)]} of {goal}"
                for i in range(plan_size)
            ]
        }
    else:
        words = _filler(u, 120).split()
        value = {
            "answer": _PREFIX + prompt[:200] + (" " + note if note else "") + tail,
            "confidence": round(0.5 + u / 2, 2),
            "findings": [" ".join(words[i : i + 5]) for i in range(0, min(len(words), 15), 5)],
        }
        if tool_results:
            value["tool_results"] = list(tool_results)
    text = json.dumps(value, ensure_ascii=False)
    if broken:
        text = "Here is the JSON you asked for:\n```json\n" + text[: max(10, int(len(text) * 0.7))]
    return text


_PIECE = re.compile(r"\s*\S+|\s+$")


def split_pieces(content: str) -> list[str]:
    """Stream pieces (a word with its leading whitespace); they join back to ``content``."""
    return _PIECE.findall(content) or [content]
