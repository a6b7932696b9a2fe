"""The simulated model as a judge, and the quality of its own answers: pure rules, no HTTP.

Two halves of one loop, so that LLM-as-a-judge and context pollution play out offline:

Quality of an answer (``answer_quality``)
    Every task answer the simulator makes (text, or JSON's ``"answer"`` string; not a plan,
    not a tool-calling step, not a judge's verdict) has a quality 1-10 and carries it as a
    trailing mark ``⟨qN⟩`` (``quality_mark``). Without ``SimConfig.drift_after_rounds`` the
    quality is 8 or 9 (seeded). With it set to N, the request's rolling memory decides: a
    system message starting with ``MEMORY_HEADER`` holding k ``Round j: ...`` parts
    (``memory_rounds``) gives quality 9 ±1 (max 10) while k <= N, and 9 - 2 * (k - N) ±1
    (at least 1) past it; no memory (round 1, or after a flush) is fresh again. A degraded
    answer shows it (``drift_line``): it repeats phrases of the earlier rounds and says it
    is losing track of the task.

The judge (``judge_request``, ``judge_content``)
    A request is a judge request when its first message is a system message starting with
    ``JUDGE_PREFIX`` ("You are an impartial judge"). The user message carrying the sections
    ``TASK:\\n...\\n\\nANSWER:\\n...`` (pointwise) or ``TASK:\\n...\\n\\nANSWER A:\\n...\\n\\n
    ANSWER B:\\n...`` (pairwise) is what is judged (the last such one, so a re-ask appended
    to the conversation judges the same thing). The verdict is JSON:
    ``{"score": <1-10>, "reason": "..."}`` or ``{"better": "A"|"B"|"equal", "reason": "..."}``.
    The score follows the answer's quality: its last ``⟨qN⟩`` mark ±1 (seeded per request,
    clamped 1-10); an answer without a mark gets 6-9 from a hash of (seed, its text).
    Pairwise compares the two qualities (mark, else the same hash score): "equal" when they
    are within 1. ``SimConfig.judge_prose_first`` makes the next N verdicts prose ("I would
    rate this answer a seven out of ten.") so a client's JSON re-ask can be tested.
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

__all__ = [
    "JUDGE_PREFIX",
    "MEMORY_HEADER",
    "QUALITY_MARK",
    "JudgeRequest",
    "judge_request",
    "judge_content",
    "memory_rounds",
    "memory_phrases",
    "answer_quality",
    "quality_mark",
    "quality_of",
    "drift_line",
]

#: how a judge request's system message starts (swarm_tui.judge.verdict.JUDGE_PREFIX)
JUDGE_PREFIX = "You are an impartial judge"
#: how the rolling-memory system message starts (swarm_tui.swarm.memory.MEMORY_HEADER)
MEMORY_HEADER = "Memory of the swarm's previous rounds"

#: the quality an answer carries: ``⟨q1⟩`` .. ``⟨q10⟩``
QUALITY_MARK = re.compile(r"⟨q(10|[1-9])⟩")
_ROUND_PART = re.compile(r"(?:\A|\n\n)Round (\d+): ")

_NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


# --------------------------------------------------------------------------------------
# quality of the simulator's own answers


def _rng(seed: int, *parts: object) -> random.Random:
    text = "\x00".join(str(p) for p in (seed, *parts))
    return random.Random(int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big"))


def _memory_text(messages: Sequence[Any]) -> str | None:
    for m in messages:
        if isinstance(m, dict) and m.get("role") == "system":
            text = content_text(m.get("content"))
            if text.startswith(MEMORY_HEADER):
                return text
    return None


def memory_rounds(messages: Sequence[Any]) -> int:
    """How many rounds the request's rolling-memory message holds (0 when it has none)."""
    text = _memory_text(messages)
    if text is None:
        return 0
    return len(_ROUND_PART.findall(text))


def memory_phrases(messages: Sequence[Any], limit: int) -> list[tuple[int, str]]:
    """Up to ``limit`` ``(round, phrase)``: the first words of the oldest remembered rounds."""
    text = _memory_text(messages)
    if text is None or limit <= 0:
        return []
    found = list(_ROUND_PART.finditer(text))
    out: list[tuple[int, str]] = []
    for i, m in enumerate(found[:limit]):
        end = found[i + 1].start() if i + 1 < len(found) else len(text)
        part = QUALITY_MARK.sub("", text[m.end() : end])
        part = part.replace("Sim answer to:", " ")
        words = part.split()[:8]
        phrase = " ".join(words)[:60].strip()
        if phrase:
            out.append((int(m.group(1)), phrase))
    return out


def answer_quality(seed: int, key: str, occurrence: int, rounds: int, drift_after: int | None) -> int:
    """The quality (1-10) of the answer to a request whose memory holds ``rounds`` rounds."""
    rng = _rng(seed, "quality", key, occurrence)
    if drift_after is None:
        return 8 + (rng.random() < 0.5)
    base = 9 if rounds <= drift_after else 9 - 2 * (rounds - drift_after)
    return max(1, min(10, base + rng.choice((-1, 0, 1))))


def quality_mark(quality: int) -> str:
    """The short mark an answer ends with: `` ⟨q7⟩``."""
    return f" ⟨q{quality}⟩"


def quality_of(text: str) -> int | None:
    """The quality an answer carries (its last ``⟨qN⟩`` mark), None when it carries none."""
    found = QUALITY_MARK.findall(text)
    return int(found[-1]) if found else None


def drift_line(messages: Sequence[Any], rounds: int, drift_after: int) -> str | None:
    """What a polluted answer says before its filler (None while the memory is not past N)."""
    over = rounds - drift_after
    if over <= 0:
        return None
    echoes = memory_phrases(messages, min(over, 3))
    said = " … ".join(f'as I said in round {r}, "{p}"' for r, p in echoes)
    confusion = (
        "I am not sure which task this is any more."
        if over == 1
        else "I am confused: the earlier rounds and this task run together."
    )
    return f"(drifting) {said + ' … ' if said else ''}{confusion}"


# --------------------------------------------------------------------------------------
# the judge


@dataclass(slots=True, frozen=True)
class JudgeRequest:
    kind: str  # "pointwise" or "pairwise"
    task: str
    answers: tuple[str, ...]  # one (pointwise) or two (A, B)


def judge_request(messages: Sequence[Any]) -> JudgeRequest | None:
    """The judge request ``messages`` make, or None when they are not one."""
    if not messages:
        return None
    first = messages[0]
    if not (isinstance(first, dict) and first.get("role") == "system"):
        return None
    if not content_text(first.get("content")).startswith(JUDGE_PREFIX):
        return None
    fallback = ""
    for m in reversed(messages):
        if not (isinstance(m, dict) and m.get("role") == "user"):
            continue
        text = content_text(m.get("content"))
        fallback = fallback or text
        parsed = _sections(text)
        if parsed is not None:
            return parsed
    return JudgeRequest("pointwise", "", (fallback,))


def _sections(text: str) -> JudgeRequest | None:
    if not text.startswith("TASK:\n"):
        at = text.find("TASK:\n")
        if at < 0:
            return None
        text = text[at:]
    body = text[len("TASK:\n") :]
    a = body.find("\n\nANSWER A:\n")
    if a >= 0:
        b = body.find("\n\nANSWER B:\n", a)
        if b >= 0:
            first = body[a + len("\n\nANSWER A:\n") : b]
            second = body[b + len("\n\nANSWER B:\n") :]
            return JudgeRequest("pairwise", body[:a], (first, second))
    p = body.find("\n\nANSWER:\n")
    if p >= 0:
        return JudgeRequest("pointwise", body[:p], (body[p + len("\n\nANSWER:\n") :],))
    return None


def _text_score(seed: int, text: str) -> int:
    """6-9 from a hash of the text: an answer the simulator did not mark."""
    digest = hashlib.sha256(f"{seed}\x00judge-text\x00{text}".encode()).digest()
    return 6 + digest[0] % 4


def _reason(score: int, marked: bool) -> str:
    if not marked:
        return "a plausible answer to the task; nothing stands out either way"
    if score >= 8:
        return "answers the task directly and stays on topic"
    if score >= 5:
        return "partly on task, but repeats material from earlier rounds"
    return "drifts from the task, repeats earlier rounds and admits confusion"


def judge_content(req: JudgeRequest, seed: int, key: str, occurrence: int, prose: bool) -> tuple[str, int | str]:
    """The judge's answer text and its verdict (the score, or "A" / "B" / "equal")."""
    if req.kind == "pairwise":
        qa, qb = (quality_of(t) for t in req.answers)
        sa = qa if qa is not None else _text_score(seed, req.answers[0])
        sb = qb if qb is not None else _text_score(seed, req.answers[1])
        better = "equal" if abs(sa - sb) <= 1 else "A" if sa > sb else "B"
        if prose:
            said = {
                "A": "the first answer is the stronger one",
                "B": "the second answer is the stronger one",
                "equal": "the two answers are about as good as each other",
            }[better]
            return f"Having read both, I think {said}.", better
        reason = f"A about {_NUMBER_WORDS[sa]}, B about {_NUMBER_WORDS[sb]} out of ten" + (
            "; close enough to call even" if better == "equal" else f"; {better} holds to the task better"
        )
        return json.dumps({"better": better, "reason": reason}, ensure_ascii=False), better
    answer = req.answers[0]
    quality = quality_of(answer)
    if quality is None:
        score = _text_score(seed, answer)
    else:
        noise = _rng(seed, "judge", key, occurrence).choice((-1, 0, 0, 1))
        score = max(1, min(10, quality + noise))
    if prose:
        word = _NUMBER_WORDS[score]
        return f"I would rate this answer {'an' if word[0] == 'e' else 'a'} {word} out of ten.", score
    return json.dumps({"score": score, "reason": _reason(score, quality is not None)}, ensure_ascii=False), score
