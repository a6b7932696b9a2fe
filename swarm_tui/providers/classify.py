"""What went wrong with a call, and whether trying again can help.

Classification reads status, `code`, `type` and message together, because providers disagree:
a 429 is a rate limit to wait out unless it says the account is out of money
(`insufficient_quota`, Moonshot's `exceeded_current_quota_error`), DeepSeek says the same with
402, and a 400 about context length is fixable by trimming, not by retrying.

The message is always the provider's own words: an OpenAI error's `message`, else what another
body says (an HTML page's title, FastAPI's `detail`, a bare `message` or `error` string), cut to
a line, with the run's secrets masked. An error sent inside an answer (an SSE `error` event
mid-stream, a 200 whose body is an error object) is classified as the same error sent as a status.
"""

from __future__ import annotations

import asyncio
import email.utils
import math
import ssl
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import aiohttp
import openai

from swarm_tui.core.call_errors import (
    CONTEXT_CODES,
    NEVER_RETRIED,
    OVERLOAD_WORDS,
    QUOTA_CODES,
    RETRYABLE,
    CallError,
    ErrorClass,
)
from swarm_tui.providers.body import declared_charset
from swarm_tui.providers.wire import HttpStatusError
from swarm_tui.providers.words import answer_body, one_line, provider_words, status_line
from swarm_tui.util import secrets as masking


def classify(exc: BaseException, *, secrets: tuple[str, ...] = ()) -> CallError:
    """Turn an exception from the SDK (or our own timeout) into a `CallError`."""
    untrusted = untrusted_certificate(exc)
    if untrusted is not None:  # never heals by trying again (the SDK's aiohttp transport calls it a timeout)
        return CallError(ErrorClass.CONNECTION, redact(untrusted, secrets), should_retry=False)
    if isinstance(exc, openai.APIStatusError):
        return _classify_status(exc, secrets)
    if isinstance(exc, HttpStatusError):  # the aiohttp hot path's non-2xx answer
        return classify_reply(exc.status, exc.body, headers=exc.headers, request_id=exc.request_id, secrets=secrets)
    if isinstance(exc, (openai.APITimeoutError, asyncio.TimeoutError, TimeoutError)):
        return CallError(ErrorClass.TIMEOUT, redact(str(exc) or "attempt timed out", secrets))
    if isinstance(exc, aiohttp.ClientError):  # refused, reset, closed mid-answer, a bad payload
        return CallError(ErrorClass.CONNECTION, redact(f"connection error ({type(exc).__name__}: {exc})", secrets))
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc
        return CallError(ErrorClass.CONNECTION, redact(f"{exc.message} ({type(cause).__name__}: {cause})", secrets))
    if isinstance(exc, openai.APIResponseValidationError):
        return CallError(ErrorClass.BAD_RESPONSE, redact(str(exc), secrets))
    if isinstance(exc, BrokenStreamError):
        return CallError(ErrorClass.BROKEN_STREAM, redact(str(exc), secrets))
    if isinstance(exc, ErrorInAnswer):
        return _classify_error_in_answer(exc, secrets)
    if isinstance(exc, BadResponseError):
        return CallError(
            ErrorClass.BAD_RESPONSE, redact(str(exc), secrets), exc.status, "bad_response", request_id=exc.request_id
        )
    return CallError(ErrorClass.UNEXPECTED, redact(f"{type(exc).__name__}: {exc}", secrets))


def untrusted_certificate(exc: BaseException) -> str | None:
    """Why the server's TLS certificate was refused, when that is what `exc` (or what caused it) is."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, aiohttp.ClientConnectorCertificateError):
            cause = cause.certificate_error
        if isinstance(cause, ssl.SSLCertVerificationError):
            why = cause.verify_message or cause.reason or str(cause)
            return f"the server's TLS certificate is not trusted ({why})"
        cause = cause.__cause__ or cause.__context__
    return None


class BrokenStreamError(Exception):
    """A stream that ended without a finish reason, or stalled past its idle deadline."""


class BadResponseError(Exception):
    """A successful status whose body is not a chat completion; the message keeps its start."""

    def __init__(self, message: str, status: int | None = None, request_id: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.request_id = request_id


class ErrorInAnswer(BadResponseError):
    """An error object the provider sent inside a successful answer: an SSE `error` event (or a
    chunk that is an error) mid-stream, or a 200 whose body is `{"error": {...}}` without choices.

    Classified as the same error sent as an HTTP status (`implied_status`): a server error is
    retried, a rate limit paced, with the answer's Retry-After and rate headers; what was received
    before it is never kept as an answer. A Batch line reading one sees a `BadResponseError`."""

    def __init__(
        self,
        error: Mapping[str, Any],
        headers: Mapping[str, str],
        where: str,
        status: int = 200,
        request_id: str | None = None,
    ) -> None:
        super().__init__(f"{where}: {error}", status, request_id)
        self.error = error
        self.headers = headers
        self.where = where


def _classify_error_in_answer(exc: ErrorInAnswer, secrets: tuple[str, ...]) -> CallError:
    error = classify_reply(
        implied_status(exc.error),
        {"error": exc.error},
        headers=exc.headers,
        request_id=exc.request_id or exc.headers.get("x-request-id"),
        secrets=secrets,
    )
    return replace(error, message=f"{error.message} ({exc.where})", status=exc.status)


def implied_status(error: Mapping[str, Any]) -> int:
    """The HTTP status an error object sent inside an answer stands for: its own `status` or numeric
    `code` (OpenRouter, vLLM), else what its type and code say; a server error when nothing does
    (the answer had begun: whatever broke it is on the server's side)."""
    for key in ("status", "status_code", "code"):
        value = error.get(key)
        if isinstance(value, str) and value.isdigit():
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and 400 <= value < 600:
            return value
    words = " ".join(str(error.get(key) or "") for key in ("type", "code", "message")).lower()
    if any(code in words for code in QUOTA_CODES) or "quota" in words:
        return 429
    if "rate_limit" in words or "rate limit" in words or "too many requests" in words:
        return 429
    if any(word in words for word in ("overloaded", *OVERLOAD_WORDS)):
        return 529
    if "context_length" in words or "invalid_request" in words or "bad_request" in words:
        return 400
    if "authentication" in words or "invalid_api_key" in words:
        return 401
    if "permission" in words:
        return 403
    return 500


def _classify_status(exc: openai.APIStatusError, secrets: tuple[str, ...]) -> CallError:
    headers = exc.response.headers
    try:  # the body as received, read as the aiohttp path reads it (the SDK keeps only `error` of a dict)
        body: Any = answer_body(exc.response.content, declared_charset(headers.get("content-type")))
    except Exception:  # a streamed answer whose body was never read
        body = exc.body
    return classify_reply(
        exc.status_code,
        body,
        headers=headers,
        request_id=headers.get("x-request-id") or exc.request_id,
        secrets=secrets,
    )


def classify_reply(
    status: int,
    body: Any,
    *,
    headers: Mapping[str, str] | None = None,
    message: str | None = None,
    request_id: str | None = None,
    secrets: tuple[str, ...] = (),
) -> CallError:
    """Classify an error answer from its status, body and headers: a live call's (through
    `classify`), or a line of a Batch error file, which has the same status and body. `message`:
    the words to use when the body has none."""
    headers = headers if headers is not None else {}
    fields = body if isinstance(body, dict) else {}
    error = fields.get("error", fields)
    if not isinstance(error, dict):
        error = {}
    code = str(error.get("code") or "") or None
    etype = str(error.get("type") or "")
    if error.get("message") and not isinstance(error["message"], (dict, list)):
        message = str(error["message"])  # an OpenAI-shaped error: its message as the provider wrote it
    else:
        words = provider_words(body)
        message = status_line(status, one_line(redact(words, secrets)) if words else message)
    lowered = f"{code} {etype} {message}".lower()

    if status == 402 or code in QUOTA_CODES or etype in QUOTA_CODES or "quota" in lowered and status == 429:
        kind = ErrorClass.QUOTA
    elif status == 429:
        kind = ErrorClass.TOO_LARGE if "request too large" in lowered else ErrorClass.RATE_LIMIT
    elif status == 400 and (
        code in CONTEXT_CODES
        or "context length" in lowered
        or "context_length" in lowered
        or "maximum context" in lowered
        or "context size" in lowered
        or etype == "exceed_context_size_error"
    ):  # llama.cpp's words
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
    elif 300 <= status < 400:
        kind = ErrorClass.REDIRECT
        location = headers.get("location") or "(no Location header)"
        message = (
            f"HTTP {status} redirect to {location}: not followed, a chat call is never sent anywhere but "
            f"the base URL (check it: a trailing /v1, http vs https?)"
        )
    elif status >= 500:
        kind = ErrorClass.SERVER
    else:
        kind = ErrorClass.BAD_REQUEST
    retry_after = parse_retry_after(headers) if kind in RETRYABLE else None
    rate_headers = {k.lower(): v for k, v in headers.items() if k.lower().startswith("x-ratelimit-")}
    should_retry = {"true": True, "false": False}.get((headers.get("x-should-retry") or "").strip().lower())
    if should_retry and kind in NEVER_RETRIED:
        should_retry = None  # a header cannot make an empty account, a redirect or a too-long prompt worth retrying
    return CallError(kind, redact(message, secrets), status, code, retry_after, request_id, rate_headers, should_retry)


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms`, or `retry-after` (seconds or an HTTP date).

    Not capped here (the engine caps it, `--max-retry-after`); `inf` stays inf, `nan` is ignored."""
    value = headers.get("retry-after-ms")
    if value:
        try:
            seconds = float(value) / 1000.0
            if not math.isnan(seconds):
                return max(0.0, seconds)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        seconds = float(value)
        return None if math.isnan(seconds) else max(0.0, seconds)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def redact(text: str, secrets: tuple[str, ...]) -> str:
    """Replace every known secret in `text` (`secrets` and the process's registered keys, in every
    spelling: `swarm_tui.util.secrets`); a provider may echo a key back."""
    return masking.mask(text, secrets)
