"""The simulator's knobs, as one plain dataclass.

Why a dataclass and nothing smarter: the same settings arrive from three places (the
``swarm-tui sim`` / ``python -m swarm_tui.sim`` flags, Python callers such as tests and
benchmarks, and ``POST /sim/config`` patches at runtime), so the config must be trivially
buildable from keyword arguments and from JSON, and must say clearly what is wrong when a
value is out of range. ``SimConfig.patched(mapping)`` is the one place that turns untyped
input (JSON, flags) into a validated config.

Rate limits use token buckets. ``burst_s`` is how many seconds of traffic a bucket holds:
capacity = rate/60 * burst_s, but at least 1 (one request, or one token). A request whose
token cost exceeds the TPM bucket's capacity but not the per-minute limit is admitted when
the bucket is full and drives it into debt, so the long-run rate still holds; a request
costing more than the whole per-minute limit is refused for good ("Request too large"),
as OpenAI does.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SimConfig"]


@dataclass
class SimConfig:
    """Settings of one simulated OpenAI-compatible endpoint (all times in ms unless ``_s``)."""

    #: median time to first token (the lognormal's median); 0 answers immediately
    latency_ms: float = 40.0
    #: sigma of the lognormal latency (0 = every request takes exactly ``latency_ms``)
    latency_sigma: float = 0.5
    #: requests per minute (token bucket); None = unlimited
    rpm: int | None = None
    #: tokens per minute, charged as prompt estimate + max_tokens; None = unlimited
    tpm: int | None = None
    #: seconds of traffic a rate-limit bucket holds (burst size)
    burst_s: float = 1.0
    #: share of requests answered with a 5xx (about 45% 500, 40% 503, 15% 502)
    error_rate: float = 0.0
    #: share of requests that never answer (they wait ``hang_s``, then get a 504)
    hang_rate: float = 0.0
    #: how long a hung request hangs, in seconds
    hang_s: float = 600.0
    #: share of streamed requests that send a few chunks, then stall for ``hang_s``
    stream_stall_rate: float = 0.0
    #: share of request bodies answered ``slow_factor`` times slower than their drawn latency:
    #: decided per body (every sending of the same body is as slow, as a long prompt or a
    #: cold replica would make it), so a copy sent again is no faster
    slow_rate: float = 0.0
    #: how many times slower a slow body's answer is (``slow_rate``)
    slow_factor: float = 200.0
    #: a window when the account's quota is spent: from this many seconds after the simulator
    #: started (or was reset, or this field was patched) every chat request is answered 429
    #: ``insufficient_quota`` for ``quota_for_s`` seconds; None = never
    quota_at_s: float | None = None
    #: how long the quota window lasts, in seconds
    quota_for_s: float = 10.0
    #: seed of every random decision (faults, latency, answer length and text)
    seed: int = 0
    #: prompt tokens + max_tokens above this answer 400 context_length_exceeded
    context_window: int = 131072
    #: a repeated prefix shorter than this is not reported as cached
    cache_min_tokens: int = 128
    #: inclusive range of the drawn answer length in tokens (capped by max_tokens)
    output_tokens: tuple[int, int] = (16, 120)
    #: delay between streamed content chunks (0 = send the whole stream in one write)
    chunk_delay_ms: float = 0.0
    #: answers take time to write, as a model's do: the drawn latency is the time to the first
    #: token, then the answer's tokens come at this rate (a plain answer arrives when the last
    #: is written; a stream's chunks are spaced so); None = the whole answer at once
    tokens_per_s: float | None = None
    #: when set, requests must carry ``Authorization: Bearer <require_key>`` (else 401)
    require_key: str | None = None
    #: when True every chat request gets 503 (an endpoint that is down; failover tests)
    down: bool = False
    #: False: no ``x-ratelimit-*`` headers (many relays and local servers send none), so a
    #: client must find the limit from 429s alone
    rate_headers: bool = True
    #: False: the ``x-ratelimit-*`` headers come on 429s only, never on a success (many relays):
    #: a client learns the limit only once it has passed it
    rate_headers_on_success: bool = True
    #: model ids listed by GET /v1/models (any model name is accepted and echoed, unless
    #: ``only_listed_models``)
    models: tuple[str, ...] = field(default=("sim-1",))
    #: True: a chat request naming a model not in ``models`` is answered 404 ``model_not_found``
    #: (OpenAI's words), as a provider or key that does not serve the model answers
    only_listed_models: bool = False
    #: True: every chat request is answered 429 stating a limit of 0 (``x-ratelimit-limit-requests:
    #: 0``, "Limit 0"), with a Retry-After of a second: a key or tier with no allowance for the model,
    #: which no wait cures
    limit_zero: bool = False
    #: inclusive range of the tool rounds an agent takes before its final answer, drawn per
    #: task when a request offers tools and no ``[[sim:tools=N]]`` marker scripts it
    tool_rounds: tuple[int, int] = (1, 4)
    #: True: every answer carries ``reasoning_content`` (as ``[[sim:reasoning]]`` does for one task)
    reasoning: bool = False
    #: Batch API (``batches.py``): seconds a batch takes from creation to its end, compressed
    #: from OpenAI's hours (10% validating, 80% in progress, 10% finalizing; 0 = at once)
    batch_seconds: float = 3.0
    #: Batch API: share of batch lines that fail with a 500 on top of what ``chat`` decides
    #: (seeded per custom_id and submission)
    batch_error_rate: float = 0.0
    #: Batch API: when set, a batch runs only this share of its lines, then ends ``expired``
    #: at ``batch_seconds`` (the rest go to the error file as ``batch_expired``); None = never
    batch_expire_after: float | None = None
    #: context pollution (``judging.py``): when set to N, an answer whose request's rolling
    #: memory holds k > N rounds degrades about 2 quality points per round past N (and says
    #: so); no memory (round 1, after a flush) is fresh again. None: no drift (quality 8-9)
    drift_after_rounds: int | None = None
    #: the next N judge verdicts are prose, not JSON (counted from start, reset, or a patch
    #: setting it), so a client's JSON re-ask can be tested
    judge_prose_first: int = 0
    #: service tiers (a request's ``service_tier``, echoed in its answer): a Flex answer takes
    #: this many times the latency and writing time, a Priority one this share of it
    flex_latency_factor: float = 4.0
    priority_latency_factor: float = 0.5
    #: share of Flex requests answered 429 "resource unavailable" (no capacity now; not billed)
    flex_unavailable_rate: float = 0.05
    #: unusable answers (``answer_faults.py``), drawn per request, first answers only (a re-ask
    #: is answered well): a refusal (``message.refusal``), a filtered answer
    #: (``finish_reason: content_filter``), an answer cut short (``finish_reason: length``)
    refusal_rate: float = 0.0
    content_filter_rate: float = 0.0
    length_rate: float = 0.0
    #: share of JSON answers that break the schema asked for: a wrong enum value, a missing
    #: required field, or the JSON wrapped in prose
    schema_break_rate: float = 0.0
    #: models that always answer well (a stronger model to escalate to)
    strong_models: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.validate()

    # -- validation -------------------------------------------------------------------

    def validate(self) -> None:
        """Raise ValueError naming the field when a value has the wrong type or is out of range.

        Every field is checked, types included (a ``"0.5"`` string or a ``True`` is not a
        number here, NaN and infinity are not durations): a config reaches the simulator only
        through this method, whether built in Python, from flags or from a JSON patch."""
        for name in (
            "error_rate",
            "hang_rate",
            "stream_stall_rate",
            "slow_rate",
            "batch_error_rate",
            "flex_unavailable_rate",
            "refusal_rate",
            "content_filter_rate",
            "length_rate",
            "schema_break_rate",
        ):
            v = _number(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1, got {v!r}")
        if self.error_rate + self.hang_rate > 1.0:
            raise ValueError(f"error_rate + hang_rate must not exceed 1, got {self.error_rate!r} + {self.hang_rate!r}")
        for name in ("latency_ms", "latency_sigma", "hang_s", "chunk_delay_ms", "batch_seconds", "quota_for_s"):
            if _number(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        for name in ("flex_latency_factor", "priority_latency_factor", "slow_factor"):
            if not _number(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        if self.tokens_per_s is not None and not _number(self, "tokens_per_s") > 0:
            raise ValueError(f"tokens_per_s must be > 0 or None, got {self.tokens_per_s!r}")
        if self.quota_at_s is not None and _number(self, "quota_at_s") < 0:
            raise ValueError(f"quota_at_s must be >= 0 or None, got {self.quota_at_s!r}")
        if self.batch_expire_after is not None and not 0.0 <= _number(self, "batch_expire_after") <= 1.0:
            raise ValueError(f"batch_expire_after must be between 0 and 1 or None, got {self.batch_expire_after!r}")
        if _number(self, "burst_s") <= 0:
            raise ValueError(f"burst_s must be > 0, got {self.burst_s!r}")
        for name in ("rpm", "tpm"):
            v = getattr(self, name)
            if v is not None and (not _is_int(v) or v <= 0):
                raise ValueError(f"{name} must be a positive integer or None, got {v!r}")
        if not _is_int(self.seed):
            raise ValueError(f"seed must be an integer, got {self.seed!r}")
        if not _is_int(self.context_window) or self.context_window < 1:
            raise ValueError(f"context_window must be an integer >= 1, got {self.context_window!r}")
        if not _is_int(self.cache_min_tokens) or self.cache_min_tokens < 0:
            raise ValueError(f"cache_min_tokens must be an integer >= 0, got {self.cache_min_tokens!r}")
        drift = self.drift_after_rounds
        if drift is not None and (not _is_int(drift) or drift < 0):
            raise ValueError(f"drift_after_rounds must be an integer >= 0 or None, got {drift!r}")
        if not _is_int(self.judge_prose_first) or self.judge_prose_first < 0:
            raise ValueError(f"judge_prose_first must be an integer >= 0, got {self.judge_prose_first!r}")
        bounds = self.output_tokens
        if (
            not isinstance(bounds, tuple)
            or len(bounds) != 2
            or not all(_is_int(b) for b in bounds)
            or not 1 <= bounds[0] <= bounds[1]
        ):
            raise ValueError(f"output_tokens must be (min, max) with 1 <= min <= max, got {bounds!r}")
        rounds = self.tool_rounds
        if (
            not isinstance(rounds, tuple)
            or len(rounds) != 2
            or not all(_is_int(b) for b in rounds)
            or not 0 <= rounds[0] <= rounds[1]
        ):
            raise ValueError(f"tool_rounds must be (min, max) with 0 <= min <= max, got {rounds!r}")
        if self.require_key is not None and not isinstance(self.require_key, str):
            raise ValueError("require_key must be a string or None")
        for flag in _FLAGS:
            if not isinstance(getattr(self, flag), bool):
                raise ValueError(f"{flag} must be true or false, got {getattr(self, flag)!r}")
        unusable = self.refusal_rate + self.content_filter_rate + self.length_rate + self.schema_break_rate
        if unusable > 1.0:
            raise ValueError(
                f"refusal, content filter, length and schema break rates must not add up past 1, got {unusable!r}"
            )
        if not isinstance(self.strong_models, tuple) or not all(isinstance(m, str) for m in self.strong_models):
            raise ValueError(f"strong_models must be a tuple of model names, got {self.strong_models!r}")
        if (
            not isinstance(self.models, tuple)
            or not self.models
            or not all(isinstance(m, str) and m for m in self.models)
        ):
            raise ValueError(f"models must be a tuple naming at least one model, got {self.models!r}")

    # -- conversions ------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (tuples become lists). ``require_key`` is masked: stats are not secret."""
        d = dataclasses.asdict(self)
        d["output_tokens"] = list(self.output_tokens)
        d["tool_rounds"] = list(self.tool_rounds)
        d["models"] = list(self.models)
        d["strong_models"] = list(self.strong_models)
        if self.require_key is not None:
            d["require_key"] = "***"
        return d

    def patched(self, patch: Mapping[str, Any]) -> SimConfig:
        """A new validated config with ``patch`` applied; unknown fields raise ValueError.

        Accepts JSON-ish values: lists for tuples, "1:2"/"1,2" strings for ``output_tokens`` and
        ``tool_rounds``,
        ints for floats, null for the optional limits, ``batch_expire_after``, ``quota_at_s`` and
        ``drift_after_rounds`` (where 0 is a value: drift from the first remembered round).
        """
        names = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(patch) - names)
        if unknown:
            raise ValueError(f"unknown SimConfig field(s): {', '.join(unknown)}")
        values = dataclasses.asdict(self)
        for key, raw in patch.items():
            values[key] = _coerce(key, raw)
        return SimConfig(**values)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(config: SimConfig, name: str) -> float:
    """The field's value when it is a finite int or float, else ValueError naming the field."""
    value = getattr(config, name)
    if not (_is_int(value) or (isinstance(value, float) and math.isfinite(value))):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return value


_FLOATS = {
    "latency_ms",
    "latency_sigma",
    "burst_s",
    "error_rate",
    "hang_rate",
    "hang_s",
    "stream_stall_rate",
    "slow_rate",
    "slow_factor",
    "quota_for_s",
    "chunk_delay_ms",
    "batch_seconds",
    "batch_error_rate",
    "flex_latency_factor",
    "priority_latency_factor",
    "flex_unavailable_rate",
    "refusal_rate",
    "content_filter_rate",
    "length_rate",
    "schema_break_rate",
}
_FLAGS = ("down", "rate_headers", "rate_headers_on_success", "reasoning", "only_listed_models", "limit_zero")
"""The fields that are true or false."""
_INTS = {"seed", "context_window", "cache_min_tokens", "judge_prose_first"}
_OPT_INTS = {"rpm", "tpm"}
_OPT_FLOATS = {"batch_expire_after", "tokens_per_s", "quota_at_s"}


def _coerce(key: str, raw: Any) -> Any:
    try:
        if key in _FLOATS:
            if isinstance(raw, bool):
                raise TypeError
            return float(raw)
        if key in _INTS:
            if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
                raise TypeError
            return int(raw)
        if key in _OPT_FLOATS:
            if raw is None or raw == "":
                return None
            if isinstance(raw, bool):
                raise TypeError
            return float(raw)
        if key == "drift_after_rounds":
            if raw is None or raw == "":
                return None
            if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
                raise TypeError
            return int(raw)
        if key in _OPT_INTS:
            if raw is None or raw == 0:
                return None
            if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
                raise TypeError
            return int(raw)
        if key in _FLAGS:
            if isinstance(raw, str):
                return raw.strip().lower() in ("1", "true", "yes", "on")
            return bool(raw)
        if key == "require_key":
            return None if raw in (None, "") else str(raw)
        if key in ("output_tokens", "tool_rounds"):
            parts: list[Any]
            if isinstance(raw, str):
                parts = raw.replace(",", ":").replace("..", ":").split(":")
            elif isinstance(raw, (int, float)):
                parts = [raw, raw]
            else:
                parts = list(raw)
            if len(parts) != 2:
                raise TypeError
            return (int(parts[0]), int(parts[1]))
        if key == "strong_models":
            if isinstance(raw, str):
                return tuple(m.strip() for m in raw.split(",") if m.strip())
            return tuple(str(m) for m in raw)
        if key == "models":
            if isinstance(raw, str):
                return tuple(m.strip() for m in raw.split(",") if m.strip())
            return tuple(str(m) for m in raw)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"bad value for {key}: {raw!r}") from None
    return raw  # pragma: no cover - every field is handled above
