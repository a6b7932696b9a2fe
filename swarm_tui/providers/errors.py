"""What went wrong with a call, and whether trying again can help.

Classification reads status, `code`, `type` and message together, because providers disagree:
a 429 is a rate limit to wait out unless it says the account is out of money
(`insufficient_quota`, Moonshot's `exceeded_current_quota_error`), DeepSeek says the same with
402, and a 400 about context length is fixable by trimming, not by retrying.
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Mapping

import openai


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
    UNEXPECTED = "unexpected"


RETRYABLE = frozenset({
    ErrorClass.RATE_LIMIT, ErrorClass.SERVER, ErrorClass.TIMEOUT, ErrorClass.CONNECTION,
    ErrorClass.CONFLICT, ErrorClass.BROKEN_STREAM,
})
"""Classes worth another attempt; everything else fails the task at once."""

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

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE

    @property
    def is_rate_limit(self) -> bool:
        return self.kind is ErrorClass.RATE_LIMIT

    @property
    def is_congestion(self) -> bool:
        """A sign of sending too much: 429, 503 and timeouts shrink the concurrency limit."""
        return self.kind in (ErrorClass.RATE_LIMIT, ErrorClass.TIMEOUT) or self.status == 503


def classify(exc: BaseException, *, secrets: tuple[str, ...] = ()) -> CallError:
    """Turn an exception from the SDK (or our own timeout) into a `CallError`."""
    if isinstance(exc, openai.APIStatusError):
        return _classify_status(exc, secrets)
    if isinstance(exc, (openai.APITimeoutError, asyncio.TimeoutError, TimeoutError)):
        return CallError(ErrorClass.TIMEOUT, redact(str(exc) or "attempt timed out", secrets))
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc
        return CallError(ErrorClass.CONNECTION, redact(f"{exc.message} ({type(cause).__name__}: {cause})", secrets))
    if isinstance(exc, openai.APIResponseValidationError):
        return CallError(ErrorClass.BAD_RESPONSE, redact(str(exc), secrets))
    if isinstance(exc, BrokenStreamError):
        return CallError(ErrorClass.BROKEN_STREAM, redact(str(exc), secrets))
    return CallError(ErrorClass.UNEXPECTED, redact(f"{type(exc).__name__}: {exc}", secrets))


class BrokenStreamError(Exception):
    """A stream that ended without a finish reason, or stalled past its idle deadline."""


def _classify_status(exc: openai.APIStatusError, secrets: tuple[str, ...]) -> CallError:
    status = exc.status_code
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error", body) if isinstance(body, dict) else {}
    if not isinstance(error, dict):
        error = {}
    code = str(error.get("code") or "") or None
    etype = str(error.get("type") or "")
    message = str(error.get("message") or exc.message or f"HTTP {status}")
    lowered = f"{code} {etype} {message}".lower()
    headers = exc.response.headers
    request_id = headers.get("x-request-id") or exc.request_id

    if status == 402 or code in QUOTA_CODES or etype in QUOTA_CODES or "quota" in lowered and status == 429:
        kind = ErrorClass.QUOTA
    elif status == 429:
        kind = ErrorClass.TOO_LARGE if "request too large" in lowered else ErrorClass.RATE_LIMIT
    elif status == 400 and (code in CONTEXT_CODES or "context length" in lowered or "context_length" in lowered
                            or "maximum context" in lowered):
        kind = ErrorClass.CONTEXT_LENGTH
    elif status == 413:
        kind = ErrorClass.TOO_LARGE
    elif status == 401:
        kind = ErrorClass.AUTH
    elif status == 403:
        kind = ErrorClass.PERMISSION
    elif status == 404:
        kind = ErrorClass.NOT_FOUND
    elif status in (408,):
        kind = ErrorClass.TIMEOUT
    elif status == 409:
        kind = ErrorClass.CONFLICT
    elif status >= 500:
        kind = ErrorClass.SERVER
    else:
        kind = ErrorClass.BAD_REQUEST
    retry_after = parse_retry_after(headers) if kind in RETRYABLE else None
    rate_headers = {k.lower(): v for k, v in headers.items() if k.lower().startswith("x-ratelimit-")}
    return CallError(kind, redact(message, secrets), status, code, retry_after, request_id, rate_headers)


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms`, or `retry-after` (seconds or an HTTP date)."""
    value = headers.get("retry-after-ms")
    if value:
        try:
            return max(0.0, float(value) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def redact(text: str, secrets: tuple[str, ...]) -> str:
    """Replace every known secret in `text`; a provider may echo part of a key back."""
    for secret in secrets:
        if secret and len(secret) >= 6:
            text = text.replace(secret, "***")
    return text


def error_body(error: CallError) -> dict[str, Any]:
    """The Batch API `error` object for errors.jsonl."""
    return {"code": error.code or str(error.kind), "message": error.message, "status": error.status,
            "type": str(error.kind)}
