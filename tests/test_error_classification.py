"""The provider error table: what each status and body means, read from real HTTP responses.

A tiny aiohttp server on loopback answers each scripted status, body and headers (the request's
`model` names the scenario); the call goes through `ProviderClient` exactly as in a run, on each
backend: `aiohttp` (the project's own chat path, `providers/wire.py`, whose `HttpStatusError`
is classified) and `httpx` (the SDK's request path on httpx2, whose `APIStatusError` is). The
bodies are the ones the providers send (OpenAI, DeepSeek, Moonshot, vLLM, llama.cpp, a proxy's
HTML page).
"""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass, field

import pytest
from aiohttp import web
from swarm_tui.core.call_errors import CallError, ErrorClass
from swarm_tui.providers.classify import parse_retry_after
from swarm_tui.providers.client import ProviderClient
from swarm_tui.providers.profile import ProviderProfile


@dataclass(frozen=True)
class Case:
    status: int
    body: dict | str
    kind: ErrorClass
    retryable: bool
    headers: dict[str, str] = field(default_factory=dict)
    retry_after_s: float | None = None
    code: str | None = None
    message: str | None = None
    """The words the error carries on both backends, when the case pins them."""


def openai_error(message: str, type_: str | None, code: str | int | None, param: str | None = None) -> dict:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


RATE_HEADERS = {
    "x-ratelimit-limit-requests": "500",
    "x-ratelimit-remaining-requests": "0",
    "x-ratelimit-reset-requests": "120ms",
}

CASES: dict[str, Case] = {
    # -- money: never retried, whatever the status says
    "deepseek-402": Case(
        402,
        openai_error("Insufficient Balance", "unknown_error", "invalid_request_error"),
        ErrorClass.QUOTA,
        False,
        code="invalid_request_error",
    ),
    "openai-insufficient-quota": Case(
        429,
        openai_error(
            "You exceeded your current quota, please check your plan and billing details.",
            "insufficient_quota",
            "insufficient_quota",
        ),
        ErrorClass.QUOTA,
        False,
        headers={"retry-after": "20"},
        code="insufficient_quota",
    ),
    "moonshot-quota": Case(
        429,
        {
            "error": {
                "message": "Your account org-1 <ak-1> is suspended, please check your plan and billing details",
                "type": "exceeded_current_quota_error",
            }
        },
        ErrorClass.QUOTA,
        False,
    ),
    "billing-hard-limit": Case(
        400,
        openai_error("Billing hard limit has been reached", "invalid_request_error", "billing_hard_limit_reached"),
        ErrorClass.QUOTA,
        False,
        code="billing_hard_limit_reached",
    ),
    # -- rate limits: retried after what the provider asked
    "rate-limit-ms": Case(
        429,
        openai_error(
            "Rate limit reached for gpt-4.1 in organization org-1 on requests per min (RPM): "
            "Limit 500, Used 500, Requested 1. Please try again in 1.5s.",
            "requests",
            "rate_limit_exceeded",
        ),
        ErrorClass.RATE_LIMIT,
        True,
        headers={"retry-after-ms": "1500", "retry-after": "2", **RATE_HEADERS},
        retry_after_s=1.5,
        code="rate_limit_exceeded",
    ),
    "rate-limit-seconds": Case(
        429,
        openai_error("Too many requests", "requests", "rate_limit_exceeded"),
        ErrorClass.RATE_LIMIT,
        True,
        headers={"retry-after": "2"},
        retry_after_s=2.0,
    ),
    # -- a request larger than the TPM limit can never pass: not retried
    "request-too-large": Case(
        429,
        openai_error(
            "Request too large for gpt-4.1 in organization org-1 on tokens per min (TPM): Limit "
            "30000, Requested 52000. The input or output tokens must be reduced in order to run "
            "successfully.",
            "tokens",
            "rate_limit_exceeded",
        ),
        ErrorClass.TOO_LARGE,
        False,
        headers={"retry-after": "1"},
    ),
    "payload-too-large-413": Case(
        413, openai_error("Request entity too large", "invalid_request_error", None), ErrorClass.TOO_LARGE, False
    ),
    # -- context length: fixable by trimming, not by sending the same again
    "openai-context-length": Case(
        400,
        openai_error(
            "This model's maximum context length is 128000 tokens. However, your messages resulted "
            "in 130512 tokens. Please reduce the length of the messages.",
            "invalid_request_error",
            "context_length_exceeded",
            "messages",
        ),
        ErrorClass.CONTEXT_LENGTH,
        False,
        code="context_length_exceeded",
    ),
    "vllm-context-length": Case(  # vLLM answers a top-level error object, its code a number
        400,
        {
            "object": "error",
            "message": "This model's maximum context length is 4096 tokens. However, you "
            "requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length "
            "of the messages or completion.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
        ErrorClass.CONTEXT_LENGTH,
        False,
    ),
    "llama-cpp-context-size": Case(
        400,
        {
            "error": {
                "code": 400,
                "message": "request (4476 tokens) exceeds the available context size (4096 tokens), try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 4476,
                "n_ctx": 4096,
            }
        },
        ErrorClass.CONTEXT_LENGTH,
        False,
    ),
    # -- the caller's mistakes: never retried
    "bad-request": Case(
        400,
        openai_error("Invalid value for 'temperature': must be <= 2.", "invalid_request_error", None, "temperature"),
        ErrorClass.BAD_REQUEST,
        False,
        message="Invalid value for 'temperature': must be <= 2.",
    ),
    "unauthorized": Case(
        401,
        openai_error("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"),
        ErrorClass.AUTH,
        False,
        code="invalid_api_key",
    ),
    "forbidden": Case(
        403,
        openai_error("You are not allowed to use this model.", "permission_denied", None),
        ErrorClass.PERMISSION,
        False,
    ),
    "not-found": Case(
        404,
        openai_error(
            "The model `gpt-9` does not exist or you do not have access to it.",
            "invalid_request_error",
            "model_not_found",
        ),
        ErrorClass.NOT_FOUND,
        False,
        code="model_not_found",
    ),
    "unprocessable": Case(
        422,
        {"detail": [{"loc": ["body", "messages"], "msg": "field required"}]},
        ErrorClass.BAD_REQUEST,
        False,
        message="HTTP 422: body.messages: field required",
    ),
    # -- transient: retried
    "request-timeout-408": Case(
        408, openai_error("Request timed out.", "invalid_request_error", None), ErrorClass.TIMEOUT, True
    ),
    "conflict-409": Case(
        409,
        openai_error(
            "The request conflicts with the current state of the resource.", "invalid_request_error", "conflict"
        ),
        ErrorClass.CONFLICT,
        True,
    ),
    "server-500": Case(
        500,
        openai_error("The server had an error while processing your request.", "server_error", None),
        ErrorClass.SERVER,
        True,
    ),
    "proxy-502-html": Case(
        502,
        "<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>",
        ErrorClass.SERVER,
        True,
        message="HTTP 502 Bad Gateway",
    ),
    "overloaded-503": Case(
        503,
        openai_error("The engine is currently overloaded, please try again later.", "server_error", None),
        ErrorClass.SERVER,
        True,
        headers={"retry-after": "3"},
        retry_after_s=3.0,
    ),
}

KNOWN_GAPS: dict[str, str] = {}
"""Cases classify() is known to get wrong (strict xfail: fixing one makes the test say so)."""


@pytest.fixture
async def scripted_server():
    """An OpenAI-compatible endpoint on loopback answering each request as `CASES[model]` says."""
    release = asyncio.Event()

    async def chat(request: web.Request) -> web.StreamResponse:
        name = (await request.json())["model"]
        if name == "hang":
            await release.wait()
            return web.json_response({}, status=504)
        case = CASES[name]
        headers = {"x-request-id": f"req-{name}", **case.headers}
        if isinstance(case.body, str):
            return web.Response(status=case.status, text=case.body, content_type="text/html", headers=headers)
        return web.json_response(case.body, status=case.status, headers=headers)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}/v1"
    release.set()
    await runner.cleanup()


async def call_and_classify(base_url: str, model: str, backend: str, *, attempt_timeout_s: float = 30.0) -> CallError:
    client = ProviderClient(
        ProviderProfile("custom", base_url=base_url, backend=backend), base_url, attempt_timeout_s=attempt_timeout_s
    )
    try:
        with pytest.raises(Exception) as caught:
            await client.complete({"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8})
        return client.classify(caught.value)
    finally:
        await client.aclose()


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=pytest.mark.xfail(reason=KNOWN_GAPS[name], strict=True))
        if name in KNOWN_GAPS
        else name
        for name in CASES
    ],
)
async def test_each_provider_error_is_classified_as_the_engine_needs(name, scripted_server, backend):
    case = CASES[name]
    error = await call_and_classify(scripted_server, name, backend)
    assert (error.kind, error.status, error.retryable) == (case.kind, case.status, case.retryable), error
    assert error.retry_after_s == case.retry_after_s, "Retry-After is read for retried errors only"
    if case.code is not None:
        assert error.code == case.code
    assert error.request_id == f"req-{name}"
    assert error.message and "Traceback" not in error.message
    if case.message is not None:
        assert error.message == case.message
    if name == "rate-limit-ms":
        assert error.rate_headers == RATE_HEADERS, "a 429's x-ratelimit-* headers reach the pacing layer"
    # 429s, 503s and timeouts say "send less": they shrink the concurrency limit
    assert error.is_congestion == (case.kind in (ErrorClass.RATE_LIMIT, ErrorClass.TIMEOUT) or case.status == 503)


async def test_an_attempt_past_its_timeout_is_a_retryable_timeout(scripted_server, backend):
    error = await call_and_classify(scripted_server, "hang", backend, attempt_timeout_s=0.3)
    assert (error.kind, error.retryable, error.is_congestion) == (ErrorClass.TIMEOUT, True, True), error


async def test_a_refused_connection_is_a_retryable_connection_error(backend):
    with socket.socket() as probe:  # a loopback port nobody listens on any more
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    error = await call_and_classify(f"http://127.0.0.1:{port}/v1", "anything", backend)
    assert (error.kind, error.retryable, error.status) == (ErrorClass.CONNECTION, True, None), error


# --------------------------------------------------------------------------- Retry-After


NOW = 1445412450.0
"""Wed, 21 Oct 2015 07:27:30 GMT"""


@pytest.mark.parametrize(
    "headers, seconds",
    [
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 30.0),  # an HTTP date, 30 s ahead of `now`
        ({"retry-after": "Wednesday, 21-Oct-15 07:28:00 GMT"}, 30.0),  # the obsolete RFC 850 form
        ({"retry-after": "Wed, 21 Oct 2015 07:27:00 GMT"}, 0.0),  # already past: no wait, never negative
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "0.25"}, 0.25),
        ({"retry-after": "-3"}, 0.0),
        ({"retry-after-ms": "1500", "retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 1.5),  # -ms is the precise one
        ({"retry-after-ms": "soon", "retry-after": "4"}, 4.0),
        ({"retry-after": "in a while"}, None),
        ({}, None),
    ],
)
def test_retry_after_reads_seconds_milliseconds_and_http_dates(headers, seconds):
    assert parse_retry_after(headers, now=NOW) == seconds
