"""Determinism: every random decision of a request, drawn from the request itself.

Every random decision of a request comes from its own RNG, seeded with (config seed, SHA-256 of
the canonical request body without ``stream``/``stream_options``, and how many times that same
body was seen before: ``Occurrences``). So outcomes do not depend on how concurrent requests
interleave, a retry of the same body draws afresh but reproducibly, and a streamed and a plain
request draw alike. Draws happen in a fixed order whatever the config, so changing
``error_rate`` does not reshuffle latencies.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections import OrderedDict
from dataclasses import dataclass

__all__ = ["request_key", "request_rng", "Draws", "draw", "Occurrences", "SERVER_ERROR_STATUSES"]

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
    u_tier: float  # < flex_unavailable_rate: a Flex request finds no capacity (429)
    u_slow: float  # < slow_rate (of the body's first sighting): every answer to the body is slow
    u_answer: float = 1.0  # an unusable answer (answer_faults.py): refusal, filter, cut, schema break
    u_break: float = 0.0  # which way a JSON answer breaks its schema

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
    return Draws(
        r(), r(), r(), rng.gauss(0.0, 1.0), r(), r(), r(), r(), r(), r()
    )  # a new draw goes last: the others stay


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
