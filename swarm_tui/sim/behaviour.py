"""What the simulated model does, as pure logic: no HTTP, no event loop, no wall clock.

Kept apart from the server so every rule below is unit-testable with plain function calls
and an injected clock, and so the server's hot path is a handful of cheap calls.

Tokens
    ``estimate_tokens``: about one token per 4 bytes of UTF-8, at least 1. A prompt costs
    3 tokens plus, per message, 4 tokens plus its text (``prompt_tokens``), a crude copy of
    OpenAI's chat accounting. Answers are counted with the same estimate, so a response's
    ``completion_tokens`` always equals ``estimate_tokens(content)``.

Rate limits
    ``TokenBucket`` / ``RateLimiter``: continuous-refill buckets for RPM and TPM. A request
    is charged 1 request and ``prompt_tokens + max_tokens`` tokens (the answer length
    ceiling when max_tokens is absent), like OpenAI, which reserves max_tokens up front.
    A refused request is not charged. See ``config.py`` for bucket capacity (``burst_s``).

Prefix cache
    ``PrefixCache``: keyed by hashes of the request's message prefixes (every message but the
    last, cut at each message boundary). The longest prefix seen before that is at least
    ``cache_min_tokens`` long gives ``cached_tokens``: its token count rounded down to a
    multiple of 64. A prefix enters the cache when a
    request carrying it is admitted (past auth, validation, scripted faults and rate
    limits). Which of several concurrent requests misses is, as with a real cache, a matter
    of arrival order; every other decision is not.

Determinism
    Every random decision of a request comes from its own RNG, seeded with (config seed,
    SHA-256 of the canonical request body without ``stream``/``stream_options``, and how
    many times that same body was seen before). So outcomes do not depend on how
    concurrent requests interleave, a retry of the same body draws afresh but
    reproducibly, and a streamed and a plain request draw alike. Draws happen in a fixed
    order whatever the config, so changing ``error_rate`` does not reshuffle latencies.

Answers
    ``Sim answer to: <last user message, first 200 chars>`` then deterministic filler words
    up to the drawn length (uniform in ``output_tokens``), cut at ``max_tokens`` /
    ``max_completion_tokens`` with ``finish_reason`` "length".

Quality mark and the judge (``judging.py``)
    Every task answer ends with its quality, `` ⟨qN⟩`` (N = 1..10; a JSON answer ends its
    ``"answer"`` string with it), kept when ``max_tokens`` cuts the answer if it fits. Plans,
    tool-calling steps and judge verdicts carry none. Quality is 8-9 (seeded); with
    ``drift_after_rounds`` = N it is 9 ±1 while the request's rolling memory (the system
    message starting "Memory of the swarm's previous rounds") holds at most N rounds, and
    about 2 points less per round past N (at least 1), the answer then saying ``(drifting)``,
    repeating the earlier rounds' first words and admitting confusion. A judge request (first
    message a system message starting "You are an impartial judge", ``TASK:``/``ANSWER:`` or
    ``ANSWER A:``/``ANSWER B:`` sections) is answered with a JSON verdict whose score is the
    judged answer's last mark ±1 (or 6-9 from its text when it has none); scripted markers
    quoted in a judge request's sections are ignored (only random faults and rate limits
    apply to judge calls).

Scripted faults (markers in a user message: the first one carrying a marker)
    ``[[sim:CODE]]``      every request carrying it gets CODE;
    ``[[sim:CODExN]]``    only the first N requests carrying that message, then it is answered.
    CODE is one of:
      ``400``   context_length_exceeded (invalid_request_error, OpenAI's wording)
      ``401``   invalid_api_key
      ``403``   permission denied (unsupported_country_region_territory)
      ``404``   model_not_found
      ``408``, ``409``, ``422`` and any other 4xx: a generic error of that status
      ``429``   rate_limit_exceeded with retry-after: 1 / retry-after-ms: 100
      ``quota`` 429 insufficient_quota, no retry-after
      ``500``, ``502``, ``503``, ``504`` and any other 5xx: server_error
      ``hang``  no answer for ``hang_s`` (then 504)
      ``stall`` a stream that sends some chunks then stalls for ``hang_s`` (a plain
                request carrying it hangs)
      ``badjson`` a JSON answer wrapped in prose and a code fence, and cut short
      ``prose``   a plain-text answer even when JSON was asked for
    e.g. ``[[sim:500x2]]``, ``[[sim:429x1]]``, ``[[sim:hangx1]]``, ``[[sim:quota]]``.

Agents (``tools.py``)
    ``[[sim:tools=N]]`` (N tool rounds before the final answer when tools are offered) and
    ``[[sim:reasoning]]`` (``reasoning_content`` before the content) are directives, not
    faults; they combine with a fault marker in the same message. So is ``[[sim:tokens=N]]``:
    an answer N tokens long (cut at ``max_tokens``), for jobs that mix short and long answers.

Writing time
    With ``tokens_per_s`` the drawn latency is the time to the first token and the answer's
    tokens follow at that rate: a plain answer arrives when its last token is written, a
    stream's chunks are spaced over the writing time.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "estimate_tokens",
    "content_text",
    "prompt_tokens",
    "prefix_tokens",
    "last_user_text",
    "request_key",
    "request_rng",
    "Draws",
    "draw",
    "TokenBucket",
    "Admission",
    "RateLimiter",
    "PrefixCache",
    "Occurrences",
    "Marker",
    "find_marker",
    "build_answer",
    "split_pieces",
    "openai_duration",
    "SERVER_ERROR_STATUSES",
]

# --------------------------------------------------------------------------------------
# tokens


def estimate_tokens(text: str) -> int:
    """About one token per 4 bytes of UTF-8, and at least 1."""
    n = len(text)
    if text.isascii():
        return max(1, (n + 3) // 4)
    return max(1, (len(text.encode("utf-8")) + 3) // 4)


def content_text(content: Any) -> str:
    """The text of a message's ``content``: a string, or the text parts of a parts list."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, dict):
                t = part.get("text")
                if isinstance(t, str):
                    out.append(t)
            elif isinstance(part, str):
                out.append(part)
        return "".join(out)
    return str(content)


def _message_tokens(msg: Any) -> int:
    if not isinstance(msg, dict):
        return 4
    n = 4 + estimate_tokens(content_text(msg.get("content")))
    calls = msg.get("tool_calls")
    if calls:
        n += estimate_tokens(json.dumps(calls, separators=(",", ":")))
    return n


def prefix_tokens(messages: Sequence[Any]) -> int:
    """Tokens of every message but the last (what a prefix cache could hold)."""
    return sum(_message_tokens(m) for m in messages[:-1])


def prompt_tokens(messages: Sequence[Any]) -> int:
    """Estimated prompt tokens: 3 + per message (4 + its text)."""
    return 3 + sum(_message_tokens(m) for m in messages)


def last_user_text(messages: Sequence[Any]) -> str:
    """The text of the last ``user`` message (or of the last message when none is)."""
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            return content_text(m.get("content"))
    if messages and isinstance(messages[-1], dict):
        return content_text(messages[-1].get("content"))
    return ""


# --------------------------------------------------------------------------------------
# determinism

_VOLATILE = ("stream", "stream_options")


def request_key(body: dict) -> str:
    """SHA-256 (hex) of the canonical body without ``stream`` / ``stream_options``."""
    if "stream" in body or "stream_options" in body:
        body = {k: v for k, v in body.items() if k not in _VOLATILE}
    canon = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()


def request_rng(seed: int, key: str, occurrence: int) -> random.Random:
    """The RNG of the ``occurrence``-th sighting (0-based) of body ``key`` under ``seed``."""
    digest = hashlib.sha256(f"{seed}\x00{key}\x00{occurrence}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


@dataclass(slots=True, frozen=True)
class Draws:
    """Every random number a request needs, drawn once in a fixed order."""

    u_fault: float  # < error_rate: 5xx; < error_rate + hang_rate: hang
    u_stall: float  # < stream_stall_rate: a streamed answer stalls
    u_status: float  # which 5xx
    z_latency: float  # standard normal for the lognormal latency
    u_length: float  # answer length within output_tokens
    u_filler: float  # where the filler text starts

    def latency_s(self, median_ms: float, sigma: float) -> float:
        if median_ms <= 0:
            return 0.0
        return median_ms * math.exp(sigma * self.z_latency) / 1000.0

    def answer_tokens(self, lo: int, hi: int) -> int:
        return lo + min(hi - lo, int(self.u_length * (hi - lo + 1)))

    def server_error_status(self) -> int:
        """Mostly 500 and 503, some 502."""
        u = self.u_status
        return 500 if u < 0.45 else 503 if u < 0.85 else 502


def draw(seed: int, key: str, occurrence: int) -> Draws:
    rng = request_rng(seed, key, occurrence)
    r = rng.random
    return Draws(r(), r(), r(), rng.gauss(0.0, 1.0), r(), r())


SERVER_ERROR_STATUSES = (500, 502, 503)


class Occurrences:
    """How many times each request body was seen before (bounded, oldest forgotten)."""

    def __init__(self, max_entries: int = 1_000_000) -> None:
        self._seen: OrderedDict[str, int] = OrderedDict()
        self._max = max_entries

    def next(self, key: str) -> int:
        """Return how many times ``key`` was seen before, and count this sighting."""
        seen = self._seen
        n = seen.get(key, 0)
        seen[key] = n + 1
        if n == 0 and len(seen) > self._max:
            seen.popitem(last=False)
        return n

    def clear(self) -> None:
        self._seen.clear()

    def __len__(self) -> int:
        return len(self._seen)


# --------------------------------------------------------------------------------------
# rate limits


class TokenBucket:
    """A continuous-refill token bucket; ``now`` is passed in so tests control time.

    ``capacity`` is what the bucket holds when full; it refills at ``rate`` per second.
    A cost above the capacity (but admitted by the caller's limit) is allowed when the
    bucket is full and leaves it in debt.
    """

    __slots__ = ("rate", "capacity", "level", "stamp")

    def __init__(self, rate: float, capacity: float, now: float) -> None:
        self.rate = rate
        self.capacity = capacity
        self.level = capacity
        self.stamp = now

    def _refill(self, now: float) -> None:
        if now > self.stamp:
            self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
            self.stamp = now

    def wait_time(self, cost: float, now: float) -> float:
        """Seconds until ``cost`` could be taken (0 when it can be now)."""
        self._refill(now)
        need = min(cost, self.capacity)
        if self.level >= need - 1e-9:
            return 0.0
        return (need - self.level) / self.rate

    def take(self, cost: float, now: float) -> None:
        self._refill(now)
        self.level -= cost

    def remaining(self, now: float) -> int:
        self._refill(now)
        return max(0, int(self.level + 1e-9))

    def reset_s(self, now: float) -> float:
        """Seconds until the bucket is full again."""
        self._refill(now)
        return max(0.0, (self.capacity - self.level) / self.rate)


@dataclass(slots=True)
class Admission:
    ok: bool
    kind: str | None = None  # "requests" or "tokens" when refused
    wait_s: float = 0.0  # when refused: how long until it would be admitted
    too_large: bool = False  # a request costing more than the whole TPM limit
    limit: int = 0  # the refusing limit (per minute)
    used: int = 0  # what that minute's bucket has used, for the message


class RateLimiter:
    """RPM and TPM buckets together; answers "admit now" or "retry after X seconds"."""

    def __init__(
        self, rpm: int | None, tpm: int | None, burst_s: float = 1.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rpm = rpm
        self.tpm = tpm
        self.burst_s = burst_s
        self.clock = clock
        now = clock()
        self.requests = TokenBucket(rpm / 60.0, max(1.0, rpm / 60.0 * burst_s), now) if rpm else None
        self.tokens = TokenBucket(tpm / 60.0, max(1.0, tpm / 60.0 * burst_s), now) if tpm else None

    @property
    def active(self) -> bool:
        return self.requests is not None or self.tokens is not None

    def admit(self, tokens: int) -> Admission:
        """Charge one request of ``tokens`` tokens if both buckets allow it, else say why."""
        now = self.clock()
        rb, tb = self.requests, self.tokens
        if tb is not None and self.tpm is not None and tokens > self.tpm:
            return Admission(False, "tokens", 0.0, True, self.tpm, 0)
        if rb is not None:
            w = rb.wait_time(1, now)
            if w > 0:
                return Admission(False, "requests", w, False, self.rpm or 0, _used(rb, self.rpm or 0))
        if tb is not None:
            w = tb.wait_time(tokens, now)
            if w > 0:
                return Admission(False, "tokens", w, False, self.tpm or 0, _used(tb, self.tpm or 0))
        if rb is not None:
            rb.take(1, now)
        if tb is not None:
            tb.take(tokens, now)
        return Admission(True)

    def headers(self) -> dict[str, str]:
        """OpenAI's ``x-ratelimit-*`` headers for the configured limits.

        ``limit`` is the per-minute limit; ``remaining`` is what can be sent right now (the
        bucket's level, which ``burst_s`` caps below the per-minute limit); ``reset`` is how
        long until the bucket is full again.
        """
        if self.requests is None and self.tokens is None:
            return {}
        now = self.clock()
        h: dict[str, str] = {}
        if self.requests is not None:
            h["x-ratelimit-limit-requests"] = str(self.rpm)
            h["x-ratelimit-remaining-requests"] = str(self.requests.remaining(now))
            h["x-ratelimit-reset-requests"] = openai_duration(self.requests.reset_s(now))
        if self.tokens is not None:
            h["x-ratelimit-limit-tokens"] = str(self.tpm)
            h["x-ratelimit-remaining-tokens"] = str(self.tokens.remaining(now))
            h["x-ratelimit-reset-tokens"] = openai_duration(self.tokens.reset_s(now))
        return h


def _used(bucket: TokenBucket, limit: int) -> int:
    """The bucket's emptiness scaled to the per-minute limit, for the 429 message."""
    empty = 1.0 - max(bucket.level, 0.0) / bucket.capacity
    return min(limit, max(0, round(empty * limit)))


def openai_duration(seconds: float) -> str:
    """OpenAI's reset duration format: ``12ms``, ``1s``, ``2.4s``, ``6m0s``, ``1h2m3s``."""
    if seconds < 1.0:
        ms = math.ceil(seconds * 1000.0 - 1e-9)
        return f"{max(ms, 0)}ms"
    total = math.ceil(seconds * 1000.0 - 1e-9) / 1000.0
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    s = f"{secs:.3f}".rstrip("0").rstrip(".")
    if hours:
        return f"{int(hours)}h{int(minutes)}m{s}s"
    if minutes:
        return f"{int(minutes)}m{s}s"
    return f"{s}s"


# --------------------------------------------------------------------------------------
# prefix cache


class PrefixCache:
    """Which message prefixes were processed before; reports ``cached_tokens``."""

    def __init__(self, min_tokens: int = 128, max_entries: int = 100_000) -> None:
        self.min_tokens = min_tokens
        self._seen: OrderedDict[bytes, None] = OrderedDict()
        self._max = max_entries

    def observe(self, messages: Sequence[Any]) -> int:
        """Record this request's prefixes; return its cached tokens (0 on a miss).

        Like a provider's cache, the longest prefix seen before counts, at message boundaries:
        a shared context sent first hits even when a later, per-agent message differs.
        """
        if len(messages) < 2:
            return 0
        seen = self._seen
        hasher = hashlib.sha256()
        tokens = 0
        cached = 0
        for message in messages[:-1]:
            hasher.update(
                json.dumps(message, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
            )
            tokens += _message_tokens(message)
            h = hasher.copy().digest()
            if h in seen:
                seen.move_to_end(h)
                if tokens >= self.min_tokens and tokens >= 64:
                    cached = tokens - tokens % 64
            else:
                seen[h] = None
                if len(seen) > self._max:
                    seen.popitem(last=False)
        return cached

    def clear(self) -> None:
        self._seen.clear()


# --------------------------------------------------------------------------------------
# scripted faults

_MARKER = re.compile(r"\[\[sim:(\d{3}|hang|stall|quota|badjson|prose)(?:x(\d+))?\]\]", re.IGNORECASE)


@dataclass(slots=True, frozen=True)
class Marker:
    code: str  # "500", "429", "quota", "hang", "stall", ...
    times: int | None  # None: always; N: only the first N sightings of the body

    def applies(self, occurrence: int) -> bool:
        return self.times is None or occurrence < self.times

    @property
    def status(self) -> int | None:
        return int(self.code) if self.code.isdigit() else None


def marker_message(messages: Sequence[Any]) -> str:
    """The first user message carrying a ``[[sim:...]]`` marker ('' when none does).

    Counting ``xN`` per this message, not per body, means a re-ask that appends to the
    conversation is still the same scripted task: ``[[sim:prosex1]]`` answers prose once.
    A message whose only markers are not faults (``[[sim:tools=N]]``, ``[[sim:reasoning]]``,
    see ``tools.py``) is passed over, so it does not hide a fault marker in a later message.
    """
    for m in messages:
        if isinstance(m, dict) and m.get("role") == "user":
            text = content_text(m.get("content"))
            if "[[sim:" in text.lower() and _MARKER.search(text):
                return text
    return ""


def find_marker(text: str) -> Marker | None:
    """The first ``[[sim:CODE]]`` / ``[[sim:CODExN]]`` marker in ``text``, if any."""
    if "[[sim:" not in text.lower():
        return None
    m = _MARKER.search(text)
    if m is None:
        return None
    return Marker(m.group(1).lower(), int(m.group(2)) if m.group(2) is not None else None)


# --------------------------------------------------------------------------------------
# answers

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
