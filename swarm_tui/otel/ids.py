"""Trace and span ids derived from the run, not drawn at random.

A run's trace id is a hash of what identifies it in its journal (when it was created and the
job's name, both in `meta`), and each span's id a hash of that and of what the span is (the
session, a task's index and the first attempt number of its agent span, an attempt's number, a
tool call's id). So the live export and any later `export-traces` of the same run give the same
ids: a backend shows a second export as the same trace, not a copy, and a run copied to another
directory keeps its identity.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from swarm_tui.records import RunMeta


def run_identity(meta: RunMeta) -> str:
    """What names a run among all runs: its journal's creation time and its job's name."""
    return json.dumps([meta.created_at, meta.job.name])


KINDS = {"session": 1, "agent": 2, "chat": 3, "phase": 4}
"""The spans numbered by integers alone: their ids are one mix of 64 bits (no hash on the loop)."""
MASK64 = (1 << 64) - 1


class SpanIds:
    """The ids of one run's spans: `trace_id`, and `span(kind, *parts)` for each span."""

    def __init__(self, identity: str) -> None:
        seed = f"swarm-tui/{identity}".encode()
        digest = hashlib.sha256(seed).digest()
        self.trace_id = _nonzero(int.from_bytes(digest[:16], "big"))
        self._seed64 = int.from_bytes(digest[16:24], "big")
        self._run = hashlib.blake2b(seed, digest_size=8)
        """The run's part of a hashed span id, fed once (each such span copies it)."""

    def span(self, kind: str, *parts: object) -> int:
        code = KINDS.get(kind)
        if code is not None and len(parts) <= 2 and all(type(p) is int for p in parts):
            return self.numbered(code, *parts)  # type: ignore[arg-type]
        digest = self._run.copy()
        digest.update(f"|{kind}|{'|'.join(map(str, parts))}".encode())
        return _nonzero(int.from_bytes(digest.digest(), "big"))

    def numbered(self, code: int, index: int, number: int = 0) -> int:
        """A span named by a kind and two integers (a task's index, from -2**39, and an attempt's
        number, below 2**20): packed into 64 bits, xored with the run's seed, mixed by splitmix64.
        The mix is a bijection, so two spans of a run never share an id."""
        packed = (code << 60) | ((index & 0xFF_FFFF_FFFF) << 20) | (number & 0xF_FFFF)
        return _nonzero(_splitmix64(packed ^ self._seed64))


def _splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def _nonzero(value: int) -> int:
    """An id of all zero bits is invalid in OpenTelemetry: the (astronomically rare) case becomes 1."""
    return value or 1
