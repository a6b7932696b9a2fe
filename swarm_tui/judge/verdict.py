"""What the judge is asked, and how its answer is read (robustly, as the swarm reads JSON).

Pointwise: one answer scored 1-10 against the task and the rubric. Pairwise (shadow): which of
two answers to the same task is better, or whether they are equal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from swarm_tui.util.json_repair import JsonExtractionError, extract_json

JUDGE_PREFIX = "You are an impartial judge"
"""How every judge request's system message starts (the simulator knows its judge by it)."""

POINTWISE_FORMAT = '{"score": <integer 1-10>, "reason": "<one line>"}'
PAIRWISE_FORMAT = '{"better": "A" | "B" | "equal", "reason": "<one line>"}'
MAX_TEXT_CHARS = 12_000
"""How much of a task or an answer the judge is shown (its start)."""


class VerdictError(ValueError):
    """The judge's answer could not be read as a verdict."""


@dataclass(frozen=True)
class Score:
    score: float
    reason: str


@dataclass(frozen=True)
class Preference:
    better: str
    """"A", "B" or "equal"."""
    reason: str


def pointwise_body(model: str, rubric: str, task: str, answer: str, max_tokens: int) -> dict[str, Any]:
    system = (
        f"{JUDGE_PREFIX}. Score the ANSWER to the TASK against the rubric, from 1 (useless) to 10 "
        f"(excellent). Reply with one JSON object and nothing else: {POINTWISE_FORMAT}\n\nRubric:\n{rubric}"
    )
    user = f"TASK:\n{task[:MAX_TEXT_CHARS]}\n\nANSWER:\n{answer[:MAX_TEXT_CHARS]}"
    return _body(model, system, user, max_tokens)


def pairwise_body(model: str, rubric: str, task: str, a: str, b: str, max_tokens: int) -> dict[str, Any]:
    system = (
        f"{JUDGE_PREFIX}. Compare ANSWER A and ANSWER B to the TASK against the rubric. Reply with one "
        f"JSON object and nothing else: {PAIRWISE_FORMAT}\n\nRubric:\n{rubric}"
    )
    user = f"TASK:\n{task[:MAX_TEXT_CHARS]}\n\nANSWER A:\n{a[:MAX_TEXT_CHARS]}\n\nANSWER B:\n{b[:MAX_TEXT_CHARS]}"
    return _body(model, system, user, max_tokens)


def reask_body(body: dict[str, Any], raw: str, pairwise: bool = False) -> dict[str, Any]:
    """The same request once more, with the unreadable answer and what was expected."""
    expected = PAIRWISE_FORMAT if pairwise else POINTWISE_FORMAT
    messages = [
        *body["messages"],
        {"role": "assistant", "content": raw[:2000]},
        {"role": "user", "content": f"That could not be read. Reply with the JSON object only: {expected}"},
    ]
    return {**body, "messages": messages}


def read_score(text: str) -> Score:
    data = _object(text)
    score = data.get("score")
    if isinstance(score, str):
        try:
            score = float(score.strip().split("/")[0])
        except ValueError:
            score = None
    if not isinstance(score, int | float) or isinstance(score, bool) or not 1 <= score <= 10:
        raise VerdictError(f"no score from 1 to 10 in the judge's answer: {text[:200]!r}")
    return Score(float(score), _reason(data))


def read_preference(text: str) -> Preference:
    data = _object(text)
    better = str(data.get("better", "")).strip().upper()
    if better not in ("A", "B", "EQUAL"):
        raise VerdictError(f"no 'better' of A, B or equal in the judge's answer: {text[:200]!r}")
    return Preference("equal" if better == "EQUAL" else better, _reason(data))


def task_text(body: dict[str, Any]) -> str:
    """What the task asked: its last user message (the system prompt and context are the job's)."""
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else str(content)
    return ""


def _body(model: str, system: str, user: str, max_tokens: int) -> dict[str, Any]:
    return {
        "model": model,
        "max_tokens": max_tokens,
        "temperature": 0,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
    }


def _object(text: str) -> dict[str, Any]:
    try:
        data = extract_json(text)
    except JsonExtractionError as exc:
        raise VerdictError(f"{exc}: {text[:200]!r}") from None
    if not isinstance(data, dict):
        raise VerdictError(f"the judge answered a JSON {type(data).__name__}, not an object: {text[:200]!r}")
    return data


def _reason(data: dict[str, Any]) -> str:
    return " ".join(str(data.get("reason") or "").split())[:300]
