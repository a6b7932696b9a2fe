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
from typing import Any


def run_identity(meta: dict[str, Any]) -> str:
    """What names a run among all runs: its journal's creation time and its job's name."""
    job = meta.get("job") or {}
    return json.dumps([meta.get("created_at"), job.get("name") if isinstance(job, dict) else None])


class SpanIds:
    """The ids of one run's spans: `trace_id`, and `span(kind, *parts)` for each span."""

    def __init__(self, identity: str) -> None:
        seed = f"swarm-tui/{identity}".encode()
        self.trace_id = _nonzero(int.from_bytes(hashlib.sha256(seed).digest()[:16], "big"))
        self._run = hashlib.blake2b(seed, digest_size=8)
        """The run's part of every span's hash, fed once (each span copies it: cheap on the loop)."""

    def span(self, kind: str, *parts: object) -> int:
        digest = self._run.copy()
        digest.update(f"|{kind}|{'|'.join(map(str, parts))}".encode())
        return _nonzero(int.from_bytes(digest.digest(), "big"))


def _nonzero(value: int) -> int:
    """An id of all zero bits is invalid in OpenTelemetry: the (astronomically rare) case becomes 1."""
    return value or 1
