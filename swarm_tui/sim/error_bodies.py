"""OpenAI's error bodies, worded as OpenAI words them.

The engine classifies failures on status, ``code``, ``type`` and message together, so the
simulator must produce the same shapes a real endpoint does: ``{"error": {"message",
"type", "param", "code"}}``. Each function returns ``(status, body)``; headers such as
``retry-after`` are the server's business. Two carriers of one: a ``Refusal`` is the answer a chat
request gets before any answer is written (with its counter category and any headers it adds),
an ``ApiError`` is raised by the Batch API's files and batches and answered by the server.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Refusal",
    "ApiError",
    "bad_request_error",
    "not_found_error",
    "error_body",
    "invalid_api_key",
    "bad_request",
    "context_length_exceeded",
    "model_not_found",
    "permission_denied",
    "rate_limited",
    "request_too_large",
    "insufficient_quota",
    "resource_unavailable",
    "server_error",
    "for_status",
]

_RATE_DOCS = "Visit https://platform.openai.com/account/rate-limits to learn more."


@dataclass(slots=True, frozen=True)
class Refusal:
    """A chat request answered with an error before any answer is written."""

    status_body: tuple[int, dict[str, Any]]
    #: "rate_limited", "quota", "scripted" ... for the counters (None: a client or server error)
    category: str | None = None
    #: headers the refusal adds (a 429's ``retry-after``)
    headers: dict[str, str] = field(default_factory=dict)


class ApiError(Exception):
    """An OpenAI error answer: ``status`` and its ``{"error": {...}}`` body."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(body["error"]["message"])
        self.status = status
        self.body = body


def bad_request_error(
    message: str, param: str | None = None, code: str | None = None, line: int | None = None
) -> ApiError:
    """A 400 to raise; ``line`` names the line of an uploaded file it is about."""
    status, body = bad_request(message, param, code)
    if line is not None:
        body["error"]["line"] = line
    return ApiError(status, body)


def not_found_error(kind: str, ident: str, param: str) -> ApiError:
    return ApiError(404, error_body(f"No such {kind} object: {ident}", "invalid_request_error", param, None))


def error_body(message: str, type_: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def invalid_api_key(missing: bool) -> tuple[int, dict]:
    # The key itself is never echoed, not even masked: keys must not reach logs.
    if missing:
        msg = (
            "You didn't provide an API key. You need to provide your API key in an "
            "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
        )
    else:
        msg = "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys."
    return 401, error_body(msg, "invalid_request_error", None, "invalid_api_key")


def bad_request(message: str, param: str | None = None, code: str | None = None) -> tuple[int, dict]:
    return 400, error_body(message, "invalid_request_error", param, code)


def context_length_exceeded(window: int, prompt: int, completion: int) -> tuple[int, dict]:
    total = prompt + completion
    if completion:
        msg = (
            f"This model's maximum context length is {window} tokens. However, you "
            f"requested {total} tokens ({prompt} in the messages, {completion} in the "
            f"completion). Please reduce the length of the messages or completion."
        )
    else:
        msg = (
            f"This model's maximum context length is {window} tokens. However, your "
            f"messages resulted in {prompt} tokens. Please reduce the length of the "
            f"messages."
        )
    return 400, error_body(msg, "invalid_request_error", "messages", "context_length_exceeded")


def model_not_found(model: str) -> tuple[int, dict]:
    return 404, error_body(
        f"The model `{model}` does not exist or you do not have access to it.",
        "invalid_request_error",
        None,
        "model_not_found",
    )


def permission_denied() -> tuple[int, dict]:
    return 403, error_body(
        "Country, region, or territory not supported", "request_forbidden", None, "unsupported_country_region_territory"
    )


def rate_limited(kind: str, model: str, limit: int, used: int, requested: int, wait_text: str) -> tuple[int, dict]:
    """A 429 rate limit; ``kind`` is "requests" (RPM) or "tokens" (TPM)."""
    unit = "requests per min (RPM)" if kind == "requests" else "tokens per min (TPM)"
    msg = (
        f"Rate limit reached for {model} in organization org-sim on {unit}: "
        f"Limit {limit}, Used {used}, Requested {requested}. "
        f"Please try again in {wait_text}. {_RATE_DOCS}"
    )
    return 429, error_body(msg, kind, None, "rate_limit_exceeded")


def request_too_large(model: str, limit: int, requested: int) -> tuple[int, dict]:
    """A 429 that waiting cannot cure: the request alone exceeds the TPM limit."""
    msg = (
        f"Request too large for {model} in organization org-sim on tokens per min (TPM): "
        f"Limit {limit}, Requested {requested}. The input or output tokens must be "
        f"reduced in order to run successfully. {_RATE_DOCS}"
    )
    return 429, error_body(msg, "tokens", None, "rate_limit_exceeded")


def resource_unavailable(model: str) -> tuple[int, dict]:
    """A Flex request the provider has no capacity for now: 429, not billed; OpenAI's advice is to
    retry with backoff, or to send it at the default tier."""
    msg = (
        f"Resource unavailable: flex processing for {model} has no capacity for this request right now. "
        "Retry later with exponential backoff, or send it with service_tier 'auto' to use standard "
        "processing. You are not charged for this request."
    )
    return 429, error_body(msg, "resource_unavailable", None, "resource_unavailable")


def insufficient_quota() -> tuple[int, dict]:
    msg = (
        "You exceeded your current quota, please check your plan and billing details. "
        "For more information on this error, read the docs: "
        "https://platform.openai.com/docs/guides/error-codes/api-errors."
    )
    return 429, error_body(msg, "insufficient_quota", None, "insufficient_quota")


_SERVER_MESSAGES = {
    500: "The server had an error while processing your request. Sorry about that!",
    502: "Bad gateway.",
    503: "The server is overloaded or not ready yet.",
    504: "Gateway timeout: the request took too long to complete.",
}


def server_error(status: int) -> tuple[int, dict]:
    msg = _SERVER_MESSAGES.get(status, f"The server had an error ({status}) while processing your request.")
    return status, error_body(msg, "server_error", None, None)


_CLIENT_MESSAGES = {
    408: ("Request timed out.", "invalid_request_error", None),
    409: ("The request conflicts with the current state of the resource.", "invalid_request_error", "conflict"),
    422: ("Unprocessable entity.", "invalid_request_error", None),
}


def for_status(status: int, model: str, window: int, prompt: int, completion: int) -> tuple[int, dict]:
    """The canonical error of a scripted ``[[sim:STATUS]]`` marker."""
    if status == 400:
        return context_length_exceeded(window, max(prompt, window + 1 - completion), completion)
    if status == 401:
        return invalid_api_key(False)
    if status == 403:
        return permission_denied()
    if status == 404:
        return model_not_found(model)
    if status >= 500:
        return server_error(status)
    msg, type_, code = _CLIENT_MESSAGES.get(status, (f"Simulated error {status}.", "invalid_request_error", None))
    return status, error_body(msg, type_, None, code)
