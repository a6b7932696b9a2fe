"""A batch as OpenAI shows it, and what creating one asks for.

``Batch`` holds one batch's lines, its clock (the config it was created under: ``batch_seconds``
and the rest) and what its lines made so far; ``obj()`` is OpenAI's Batch object. ``read_create``
checks a ``POST /v1/batches`` body as OpenAI does (400s in its wording) before the store looks up
the file it names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from swarm_tui.sim.batch_files import ENDPOINT, OPENAI_ENDPOINTS, InputLine
from swarm_tui.sim.error_bodies import bad_request_error

__all__ = ["Batch", "read_create"]

_DAY = 86_400


@dataclass
class Batch:
    id: str
    input_file_id: str
    completion_window: str
    metadata: dict[str, str] | None
    model: str
    lines: list[InputLine]
    #: each line's submission index among all submissions of its custom_id (seeds its draw)
    nth: list[int]
    authorization: str | None
    #: monotonic and wall-clock times of creation
    t0: float
    wall0: float
    #: the config when created: duration, extra failures, expiry share, seed
    seconds: float
    error_rate: float
    expire_after: float | None
    seed: int
    status: str = "validating"
    #: lines run so far (the output and error lines they made)
    done: int = 0
    completed: int = 0
    failed: int = 0
    out: list[bytes] = field(default_factory=list)
    err: list[bytes] = field(default_factory=list)
    #: "in_progress_at", "finalizing_at", ... → unix seconds
    times: dict[str, int] = field(default_factory=dict)
    #: seconds after t0 when cancel was asked
    cancel_el: float | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def limit(self) -> int:
        """How many lines run before the batch expires (all of them unless in expiry mode)."""
        total = len(self.lines)
        if self.expire_after is None:
            return total
        return min(total, math.floor(total * self.expire_after))

    @property
    def expires_at(self) -> int:
        if self.expire_after is not None and self.limit < len(self.lines):
            return int(math.ceil(self.wall0 + self.seconds))
        return int(self.wall0) + _DAY

    def stamp(self, name: str, elapsed: float) -> None:
        self.times.setdefault(name, int(self.wall0 + elapsed))

    def obj(self) -> dict[str, Any]:
        """The OpenAI Batch object."""
        t = self.times
        return {
            "id": self.id,
            "object": "batch",
            "endpoint": ENDPOINT,
            "model": self.model,
            "errors": None,
            "input_file_id": self.input_file_id,
            "completion_window": self.completion_window,
            "status": self.status,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "created_at": int(self.wall0),
            "in_progress_at": t.get("in_progress_at"),
            "expires_at": self.expires_at,
            "finalizing_at": t.get("finalizing_at"),
            "completed_at": t.get("completed_at"),
            "failed_at": None,
            "expired_at": t.get("expired_at"),
            "cancelling_at": t.get("cancelling_at"),
            "cancelled_at": t.get("cancelled_at"),
            "request_counts": {"total": len(self.lines), "completed": self.completed, "failed": self.failed},
            "usage": {
                "input_tokens": self.input_tokens,
                "input_tokens_details": {"cached_tokens": self.cached_tokens},
                "output_tokens": self.output_tokens,
                "output_tokens_details": {"reasoning_tokens": self.reasoning_tokens},
                "total_tokens": self.input_tokens + self.output_tokens,
            },
            "metadata": self.metadata,
        }


def read_create(payload: Any) -> tuple[str, str, dict[str, str] | None]:
    """``(input_file_id, completion_window, metadata)`` of a ``POST /v1/batches`` body, or the 400."""
    if not isinstance(payload, dict):
        raise bad_request_error("The request body must be a JSON object.")
    for name in ("input_file_id", "endpoint", "completion_window"):
        if payload.get(name) is None:
            raise bad_request_error(f"Missing required parameter: '{name}'.", name, "missing_required_parameter")
    endpoint = payload["endpoint"]
    if endpoint != ENDPOINT:
        if endpoint in OPENAI_ENDPOINTS:
            raise bad_request_error(
                f"The simulator's batches serve only {ENDPOINT!r}, not {endpoint!r}.", "endpoint", "invalid_value"
            )
        raise bad_request_error(
            f"Invalid value: {endpoint!r}. Supported values are: " + ", ".join(repr(e) for e in OPENAI_ENDPOINTS),
            "endpoint",
            "invalid_value",
        )
    window = payload["completion_window"]
    if window != "24h":
        raise bad_request_error(
            f"Invalid value: {window!r}. Supported values are: '24h'.", "completion_window", "invalid_value"
        )
    metadata = _check_metadata(payload.get("metadata"))
    file_id = payload["input_file_id"]
    if not isinstance(file_id, str):
        raise bad_request_error("Invalid type for 'input_file_id': expected a string.", "input_file_id", "invalid_type")
    return file_id, window, metadata


def _check_metadata(raw: Any) -> dict[str, str] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise bad_request_error("Invalid type for 'metadata': expected an object.", "metadata", "invalid_type")
    if len(raw) > 16:
        raise bad_request_error(
            f"Invalid 'metadata': too many properties. Expected at most 16, got {len(raw)}.",
            "metadata",
            "object_above_max_length",
        )
    for k, v in raw.items():
        if len(k) > 64:
            raise bad_request_error(
                f"Invalid 'metadata': key {k[:20]!r}... is longer than 64 characters.",
                "metadata",
                "string_above_max_length",
            )
        if not isinstance(v, str):
            raise bad_request_error(
                f"Invalid type for 'metadata.{k}': expected a string.", f"metadata.{k}", "invalid_type"
            )
        if len(v) > 512:
            raise bad_request_error(
                f"Invalid 'metadata.{k}': longer than 512 characters.", f"metadata.{k}", "string_above_max_length"
            )
    return dict(raw)
