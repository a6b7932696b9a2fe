"""What went wrong with a call, as data: the error classes, whether one is worth another attempt,
and the classified failure of one attempt (`CallError`).

How an exception or an error answer becomes a `CallError` (status, `code`, `type` and message
read together, as providers disagree) is the providers' work (`swarm_tui.providers.classify`);
the engine, the journal and every view only read the result.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class ErrorClass(StrEnum):
    RATE_LIMIT = "rate_limit"
    QUOTA = "quota"
    SERVER = "server_error"
    TIMEOUT = "timeout"
    CONNECTION = "connection"
    CONTEXT_LENGTH = "context_length"
    AUTH = "auth"
    PERMISSION = "permission"
    NOT_FOUND = "not_found"
    BAD_REQUEST = "bad_request"
    CONFLICT = "conflict"
    TOO_LARGE = "request_too_large"
    BROKEN_STREAM = "broken_stream"
    BAD_RESPONSE = "bad_response"
    """A 200 that is not a chat completion (no choices, not JSON, an HTML page): retried like a 5xx."""
    REDIRECT = "redirect"
    """A 3xx: a chat call never follows it (a POST turned into a GET, prompts sent elsewhere)."""
    MALFORMED_ANSWER = "malformed_answer"
    """A 200 whose JSON cannot be kept strictly (not UTF-8, nested too deep): retried like bad_response."""
    ANSWER_TOO_LARGE = "answer_too_large"
    """A 200 over `--max-answer-bytes`: not retried (the same request asks for as much again)."""
    REFUSAL = "refusal"
    """A 200 whose message is the model's refusal (`message.refusal`): not done, never kept or cached."""
    CONTENT_FILTER = "content_filter"
    """A 200 the provider's filter stopped (`finish_reason: content_filter`): not done, never kept."""
    TRUNCATED = "truncated"
    """A 200 cut at its token limit (`finish_reason: length`) where the answer is checked (or empty)."""
    FAILED_CHECK = "failed_check"
    """A 200 that fails a check the job asks for (its schema, JSON, a regex, a validator)."""
    UNEXPECTED = "unexpected"


RETRYABLE = frozenset(
    {
        ErrorClass.RATE_LIMIT,
        ErrorClass.SERVER,
        ErrorClass.TIMEOUT,
        ErrorClass.CONNECTION,
        ErrorClass.CONFLICT,
        ErrorClass.BROKEN_STREAM,
        ErrorClass.BAD_RESPONSE,
        ErrorClass.MALFORMED_ANSWER,
    }
)
"""Classes worth another attempt; everything else fails the task at once."""

NEVER_RETRIED = frozenset(
    {
        ErrorClass.QUOTA,
        ErrorClass.REDIRECT,
        ErrorClass.AUTH,
        ErrorClass.PERMISSION,
        ErrorClass.CONTEXT_LENGTH,
        ErrorClass.TOO_LARGE,
    }
)
"""Classes no `x-should-retry: true` turns into a retry."""

OVERLOAD_WORDS = ("overload", "over capacity", "at capacity", "too busy", "server is busy")

MODEL_MISSING_CODES = frozenset({"model_not_found"})
MODEL_MISSING_WORDS = ("does not exist", "not exist", "not found", "no such model", "unknown model")
"""How endpoints say they do not serve a model (OpenAI's code; DeepSeek's "Model Not Exist",
Moonshot's "Not found the model", vLLM's "The model `x` does not exist")."""

QUOTA_CODES = frozenset({"insufficient_quota", "exceeded_current_quota_error", "billing_hard_limit_reached"})
CONTEXT_CODES = frozenset({"context_length_exceeded", "string_above_max_length"})


@dataclass(frozen=True, slots=True)
class CallError:
    """A classified failure of one attempt. `message` never contains a key (see `redact`)."""

    kind: ErrorClass
    message: str
    status: int | None = None
    code: str | None = None
    retry_after_s: float | None = None
    request_id: str | None = None
    rate_headers: Mapping[str, str] = field(default_factory=dict)
    """`x-ratelimit-*` headers of the error response: a 429 tells how much budget is left."""
    should_retry: bool | None = None
    """The provider's own `x-should-retry` header, which wins over the class (as in the SDK)."""
    retry_after_asked_s: float | None = None
    """Set when `retry_after_s` was capped: what the provider asked for."""

    @property
    def retryable(self) -> bool:
        if self.should_retry is not None:
            return self.should_retry
        return self.kind in RETRYABLE

    @property
    def is_rate_limit(self) -> bool:
        return self.kind is ErrorClass.RATE_LIMIT

    @property
    def is_rate_limited(self) -> bool:
        """The provider says we send too much: a 429 rate limit, or any answer with Retry-After."""
        return self.kind is ErrorClass.RATE_LIMIT or (self.retry_after_s is not None and self.kind in RETRYABLE)

    @property
    def lacks_model(self) -> bool:
        """The endpoint says it does not serve the model asked for (a 404 `model_not_found`, "the
        model ... does not exist"): no retry there can change it, another endpoint may serve it."""
        if self.kind not in (ErrorClass.NOT_FOUND, ErrorClass.BAD_REQUEST):
            return False
        if self.code in MODEL_MISSING_CODES:
            return True
        words = self.message.lower()
        return "model" in words and any(said in words for said in MODEL_MISSING_WORDS)

    @property
    def states_zero_limit(self) -> bool:
        """A rate limit whose `x-ratelimit-limit-*` headers state a limit of 0: no allowance at all,
        which no wait brings (a key or tier the model is not open to)."""
        if self.kind is not ErrorClass.RATE_LIMIT:
            return False
        for name in ("x-ratelimit-limit-requests", "x-ratelimit-limit-tokens"):
            value = self.rate_headers.get(name)
            try:
                if value is not None and float(value) == 0:
                    return True
            except ValueError:
                continue
        return False

    @property
    def is_overload(self) -> bool:
        """The server says it is overloaded: 529, or a 503 in those words (a plain 503 or a 500 may
        be any fault, and is not a reason to send less)."""
        if self.status == 529:
            return True
        return self.status == 503 and any(word in self.message.lower() for word in OVERLOAD_WORDS)

    @property
    def is_congestion(self) -> bool:
        """A sign of sending too much: a rate limit, overload, or a timeout (the engine decides
        whether a timeout is congestion from the latency curve)."""
        return self.is_rate_limited or self.is_overload or self.kind is ErrorClass.TIMEOUT


ANSWER_ERRORS = frozenset(
    {ErrorClass.REFUSAL, ErrorClass.CONTENT_FILTER, ErrorClass.TRUNCATED, ErrorClass.FAILED_CHECK}
)
"""An answer came back and is not usable: the answer checks' to act on (re-ask, more room,
escalate), never a transport retry; counted apart from them."""

ACCOUNT_ERRORS = frozenset({ErrorClass.AUTH, ErrorClass.QUOTA, ErrorClass.PERMISSION})
"""Errors no retry on the same endpoint can fix: fail over at once."""

STRAGGLER_CODE = "straggler"
"""The code of a timeout the engine called itself: an attempt abandoned past the straggler deadline."""


def error_body(error: CallError) -> dict[str, Any]:
    """The Batch API `error` object for errors.jsonl."""
    return {
        "code": error.code or str(error.kind),
        "message": error.message,
        "status": error.status,
        "type": str(error.kind),
    }
