"""L0 gateway: one shared `AsyncOpenAI` per endpoint, one call per attempt.

The SDK's own retries are off (`max_retries=0`): the engine owns retries, so that backoff is
shared, visible and journaled. A call returns the raw chat.completion JSON (what results.jsonl
stores), normalised usage, the request id and the rate-limit headers the pacing layer learns from.

Every request of a client — chat on either backend, streaming, files, batches, the probe of
`providers test` — carries the profile's headers and query and goes by one `Route` (proxy, TLS
trust, pool: `providers.transport`), resolved here once.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any

import httpx2
import openai
from openai.resources.chat.completions import AsyncCompletions
from yarl import URL

from swarm_tui.core.call_errors import CallError
from swarm_tui.core.errors import InputError
from swarm_tui.core.stalls import StallWatch
from swarm_tui.core.tiers import DEFAULT, billed_tier, served_tier
from swarm_tui.core.usage import Usage
from swarm_tui.providers.answer import (
    MAX_ANSWER_BYTES,
    NOT_PARSED,
    AnswerRefused,
    storable_error,
    strict_answer,
    strict_body,
    too_large,
)
from swarm_tui.providers.body import BodyTooLarge, declared_charset
from swarm_tui.providers.classify import (
    BadResponseError,
    BrokenStreamError,
    ErrorInAnswer,
    classify,
    classify_reply,
    untrusted_certificate,
)
from swarm_tui.providers.event_stream import event_data
from swarm_tui.providers.private_apis import body_chunks, post_raw
from swarm_tui.providers.profile import (
    ProviderProfile,
    resolve_api_key,
    resolve_headers,
    resolve_query,
    split_query,
)
from swarm_tui.providers.streamed import StreamedAnswer, StreamProgress
from swarm_tui.providers.transport import Route, route_for
from swarm_tui.providers.wire import AiohttpChat
from swarm_tui.util import secrets

CREATE_PARAMS = frozenset(inspect.signature(AsyncCompletions.create).parameters) - {"self"}
"""Body keys the SDK takes as arguments; any other key travels in `extra_body`."""

CONNECT_TIMEOUT_S = 10.0
BATCH_UPLOAD_TIMEOUT_S = 600.0
"""A Batch input or output file may be up to 200 MB: far longer than one chat call."""
DRAIN_S = 0.1
"""How long the end of a stream after its `[DONE]` is waited for (the SDK's own drain allows as much)."""
BODY_EXCERPT_CHARS = 500
"""How much of a body that is not a chat completion is kept in the attempt (for the detail view)."""


@dataclass(frozen=True, slots=True)
class CallResult:
    body: dict[str, Any]
    usage: Usage
    request_id: str | None
    rate_headers: dict[str, str] = field(default_factory=dict)
    ttft_ms: float | None = None
    raw: bytes | None = None
    """The body as strict one-line JSON (`providers.answer`: the bytes received, unless they had to
    be written again; a streamed answer's, encoded once): the journal keeps these bytes, and
    results.jsonl splices them in, instead of encoding `body` again."""
    service_tier: str | None = None
    """The tier the answer is billed at when not the default (`flex`, `priority`): the one its own
    `service_tier` says served it, else the dearer of the one asked for and the default
    (`core.tiers.billed_tier`)."""
    tokens_per_s: float | None = None
    """A streamed answer's tokens a second, from its first token to its last."""
    gap_ms: float | None = None
    """A streamed answer's mean time between two chunks."""

    @property
    def content(self) -> str:
        try:
            return self.body["choices"][0]["message"].get("content") or ""
        except (KeyError, IndexError, TypeError, AttributeError):
            return ""


@dataclass(frozen=True, slots=True)
class StreamDeadlines:
    """Watchdogs for a streamed answer: time to first token, and idle time between chunks."""

    first_token_s: float | None = None
    idle_s: float | None = None


class ProviderClient:
    """An endpoint the engine can call. Holds the only reference to the key."""

    def __init__(
        self,
        profile: ProviderProfile,
        base_url: str,
        *,
        attempt_timeout_s: float = 60.0,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
    ) -> None:
        self._attempt_timeout_s = attempt_timeout_s
        self.profile = profile
        self.base_url = base_url.rstrip("/")
        """As given (its query included): what the screens show."""
        self.max_answer_bytes = max_answer_bytes
        api_key, headers, secret_query, self.route = preflight(profile, self.base_url)
        self._secrets = (
            api_key,
            *(headers[name] for name in profile.headers_env),
            *secret_query.values(),
            *self.route.secrets,
        )
        endpoint, query = split_query(self.base_url)
        query = {**query, **profile.query, **secret_query}
        self._client = openai.AsyncOpenAI(
            base_url=endpoint,
            api_key=api_key,
            max_retries=0,
            timeout=httpx2.Timeout(attempt_timeout_s, connect=CONNECT_TIMEOUT_S),
            http_client=self.route.sdk_http_client(profile.backend, max_error_bytes=max_answer_bytes),
            default_headers=headers or None,
            default_query=query or None,
        )
        self._direct = (
            AiohttpChat(
                URL(f"{endpoint}/chat/completions").update_query(query),
                _sdk_headers(self._client),
                self.route,
                connect_timeout_s=CONNECT_TIMEOUT_S,
                max_body_bytes=max_answer_bytes,
            )
            if profile.backend == "aiohttp"
            else None
        )
        """The aiohttp backend's hot path: chat calls sent as the SDK would, without its per-call build."""

    @property
    def name(self) -> str:
        return self.profile.name

    @property
    def service_tier(self) -> str | None:
        """The tier every chat call asks for (`--service-tier`, the profile's `service_tier`), sent
        as the API's `service_tier` unless a body names its own; None: the provider's default."""
        return self.profile.service_tier

    def __repr__(self) -> str:  # never show the key
        return f"ProviderClient({self.profile.name!r}, {self.base_url!r})"

    def classify(self, exc: BaseException) -> CallError:
        """The attempt's failure; a key echoed anywhere in it (code, request id, headers) masked."""
        if isinstance(exc, AnswerRefused):
            error = exc.error
        elif isinstance(exc, BodyTooLarge):  # an answer past the cap, the rest never read
            error = too_large(exc.status, exc.request_id, exc.cap).error
        else:
            error = classify(exc, secrets=self._secrets)
        if error.should_retry is False and untrusted_certificate(exc) is not None:
            hint = "a private CA: name its PEM file in the profile's ca_bundle, or in SSL_CERT_FILE"
            error = replace(error, message=f"{error.message}; TLS trust: {self.route.trust} ({hint})")
        return secrets.mask_value(storable_error(error))

    def classify_answer(self, status: int, body: Any, request_id: str | None = None) -> CallError:
        """An error answer that came as data (a line of a Batch output or error file)."""
        error = classify_reply(status, body, request_id=request_id, secrets=self._secrets)
        return secrets.mask_value(storable_error(error))

    async def complete(
        self,
        body: dict[str, Any],
        *,
        stream: bool = False,
        deadlines: StreamDeadlines | None = None,
        bounded_by_caller: bool = False,
        progress: StreamProgress | None = None,
    ) -> CallResult:
        """One chat call. Its whole time is bounded by the attempt timeout (stall-aware), unless
        `bounded_by_caller` (the engine's own deadline is around it: one timer a call, not two).
        `progress`: a streamed call's headers and chunks are told to it as they come."""
        tier = self.profile.service_tier
        if tier is not None and "service_tier" not in body:
            body = {**body, "service_tier": tier}
        asked = body.get("service_tier")
        if stream:
            return await self._complete_streaming(
                _create_kwargs(body), deadlines or StreamDeadlines(), asked, progress or StreamProgress()
            )
        if self._direct is not None:  # its whole call bounded here, stall-aware (aiohttp's own total is not)
            if bounded_by_caller:
                status, headers, content = await self._direct.post(wire_body(body))
            else:
                async with StallWatch.of_running_loop().deadline(self._attempt_timeout_s):
                    status, headers, content = await self._direct.post(wire_body(body))
            return _chat_result(status, headers, content, self.max_answer_bytes, asked)
        # The client's own request path (auth, headers, timeouts, error types: the SDK's wire
        # semantics), with the body as the job gave it: `create()` would first walk every
        # message and tool schema through its parameter transform (1.7 ms a request, 8 ms for an
        # agent's fifth step), for a body that is plain JSON already.
        status, headers, content = await post_raw(
            self._client, "/chat/completions", wire_body(body), self.max_answer_bytes
        )
        return _chat_result(status, headers, content, self.max_answer_bytes, asked)

    async def _complete_streaming(
        self, kwargs: dict[str, Any], deadlines: StreamDeadlines, asked: Any, progress: StreamProgress
    ) -> CallResult:
        """A streamed chat call through the SDK's request path, its events read here
        (`providers.event_stream`: in the declared charset, a line, an event or the answer they add
        up to bounded by `--max-answer-bytes`), judged by its silences: the first token must come
        within `deadlines.first_token_s` of the request (its headers included), then each chunk
        within `deadlines.idle_s` of the one before; a stream that keeps sending is never cut for
        its length."""
        kwargs = {**kwargs, "stream": True, "stream_options": {"include_usage": True}}
        answer = StreamedAnswer(time.monotonic())
        stalls = StallWatch.of_running_loop()  # a stop of the process is not a stalled stream
        cap = self.max_answer_bytes
        try:
            async with stalls.deadline(deadlines.first_token_s) as first_token:
                raw = await self._client.chat.completions.with_raw_response.create(**kwargs)
                progress.opened()
                response = raw.http_response
                headers = response.headers
                request_id = headers.get("x-request-id")
                events = event_data(
                    body_chunks(response),
                    declared_charset(headers.get("content-type")),
                    cap,
                    status=response.status_code,
                    request_id=request_id,
                )
                try:
                    while True:
                        try:
                            if answer.ttft_ms is None:
                                data = await anext(events)
                            else:
                                async with stalls.deadline(deadlines.idle_s):
                                    data = await anext(events)
                        except StopAsyncIteration:
                            break
                        if data.startswith("[DONE]"):
                            await _drained(events)
                            break
                        if answer.add(_stream_chunk(data, headers, response.status_code)):
                            if answer.ttft_ms is not None and progress.first_at is None:
                                first_token.reschedule(None)  # tokens flow: only silences judge it now
                            progress.chunk()
                        if answer.size > cap:
                            raise too_large(response.status_code, request_id, cap)
                finally:
                    await events.aclose()
                    await response.aclose()
        except TimeoutError:
            if answer.ttft_ms is None:
                raise BrokenStreamError(f"no first token for {deadlines.first_token_s:g}s") from None
            raise BrokenStreamError(f"stream idle for {deadlines.idle_s:g}s") from None
        if answer.finish_reason is None:
            raise BrokenStreamError("stream ended without a finish reason")
        body, strict = strict_body(answer.body(), cap)
        usage = Usage.from_response(answer.usage)
        rate, gap = progress.tokens_per_s(usage.completion), progress.gap_s()
        return CallResult(
            body=body,
            usage=usage,
            request_id=secrets.mask_value(request_id or answer.first.get("id")),
            rate_headers=_rate_headers(headers),
            ttft_ms=answer.ttft_ms,
            raw=strict,
            service_tier=answer_tier(asked, body.get("service_tier")),
            tokens_per_s=None if rate is None else round(rate, 2),
            gap_ms=None if gap is None else round(gap * 1000, 2),
        )

    # ----------------------------------------------------------------- the Batch API (`--lane batch`)

    async def upload_batch_file(self, filename: str, data: bytes) -> str:
        """Upload a Batch input file (JSONL, purpose `batch`); its file id."""
        uploaded = await self._client.files.create(
            file=(filename, data, "application/jsonl"), purpose="batch", timeout=BATCH_UPLOAD_TIMEOUT_S
        )
        return uploaded.id

    async def create_batch(self, input_file_id: str, metadata: dict[str, str]) -> dict[str, Any]:
        batch = await self._client.batches.create(
            input_file_id=input_file_id,
            endpoint="/v1/chat/completions",
            completion_window="24h",
            metadata=metadata,
        )
        return batch.model_dump()

    async def retrieve_batch(self, batch_id: str) -> dict[str, Any]:
        return (await self._client.batches.retrieve(batch_id)).model_dump()

    async def cancel_batch(self, batch_id: str) -> dict[str, Any]:
        return (await self._client.batches.cancel(batch_id)).model_dump()

    async def find_batch(self, input_file_id: str) -> dict[str, Any] | None:
        """The batch created from `input_file_id`, if any (a process killed between creating a batch
        and journaling its id finds it here instead of submitting the same tasks again)."""
        async for batch in self._client.batches.list(limit=100):
            if batch.input_file_id == input_file_id:
                return batch.model_dump()
        return None

    async def file_content(self, file_id: str) -> bytes:
        content = await self._client.files.content(file_id, timeout=BATCH_UPLOAD_TIMEOUT_S)
        return content.content

    async def aclose(self) -> None:
        if self._direct is not None:
            await self._direct.aclose()
        await self._client.close()


def answer_tier(asked: Any, served: Any) -> str | None:
    """The tier an answer is billed at (None: the default), from the tier asked for and the one
    the answer says served it (`core.tiers.billed_tier`)."""
    if asked is None and (served is None or served == DEFAULT):  # most answers: nothing to decide
        return None
    tier = billed_tier(served_tier(asked), served_tier(served))
    return None if tier == DEFAULT else tier


def _chat_result(
    status: int, headers: Any, content: bytes, max_answer_bytes: int = MAX_ANSWER_BYTES, asked: Any = None
) -> CallResult:
    """A successful status's answer, read as a chat completion (`BadResponseError` when it is not
    one, `AnswerRefused` when it cannot be kept as strict JSON); billed at the tier it says served
    it (`answer_tier`)."""
    request_id = secrets.mask_value(headers.get("x-request-id"))  # a key echoed in it masked
    charset = declared_charset(headers.get("content-type"))
    content, parsed = strict_answer(content, status, request_id, max_answer_bytes, charset)
    data = chat_completion_or_raise(content, headers.get("content-type"), status, request_id, parsed, headers=headers)
    return CallResult(
        body=data,
        usage=Usage.from_response(data.get("usage")),
        request_id=request_id or data.get("id"),
        rate_headers=_rate_headers(headers),
        raw=content,
        service_tier=answer_tier(asked, data.get("service_tier")),
    )


def preflight(profile: ProviderProfile, base_url: str) -> tuple[str, dict[str, str], dict[str, str], Route]:
    """What a client of `profile` needs from the environment, read now: its key, its headers (those of
    `headers_env` read from their variables), the query parameters of `query_env` and its route;
    each secret among them registered to be masked (`swarm_tui.util.secrets`). InputError (exit 2) for anything
    missing or unusable, so the CLI can ask before it writes or sends anything. A profile made in
    code is held to what a config file's is (a header holding a secret is refused here too)."""
    problem = profile.problem()
    if problem is not None:
        raise InputError.single(f"provider {profile.name!r}", problem[0], problem[1])
    return (
        resolve_api_key(profile, base_url),
        resolve_headers(profile),
        resolve_query(profile),
        route_for(profile, split_query(base_url or "http://127.0.0.1")[0]),
    )


def _error_event(error: object, headers: Any) -> ErrorInAnswer:
    fields = error if isinstance(error, dict) else {"message": str(error)}
    return ErrorInAnswer(fields, headers, "an error event in the stream", request_id=headers.get("x-request-id"))


async def _drained(events: AsyncIterator[str]) -> None:
    """What a stream sends after its `[DONE]` (its end, usually), read for a short while so that an
    HTTP/1.1 connection goes back to the pool, as the SDK's reader does; nothing after it counts."""
    with contextlib.suppress(Exception):
        async with asyncio.timeout(DRAIN_S):
            async for _ in events:
                pass


def _stream_chunk(data: str, headers: Any, status: int) -> dict[str, Any]:
    """One event's data as a chunk, with what the SDK's reader dropped (a `null` field) dropped;
    an error event (`{"error": ...}`, vLLM's bare error object) raised as `ErrorInAnswer`."""
    try:
        chunk = json.loads(data)
    except ValueError:
        text = " ".join(data[: BODY_EXCERPT_CHARS * 2].split())[:BODY_EXCERPT_CHARS]
        raise BadResponseError(f"HTTP {status} but a stream event is not JSON: {text!r}", status) from None
    if not isinstance(chunk, dict):
        raise BadResponseError(f"HTTP {status} but a stream event is a JSON {type(chunk).__name__}", status)
    if chunk.get("error"):  # an SSE error event mid-stream (OpenAI's, OpenRouter's, Anthropic's shapes)
        raise _error_event(chunk["error"], headers)
    if chunk.get("object") == "error":  # vLLM's bare error object as a chunk
        raise _error_event(chunk, headers)
    return _without_nulls(chunk)


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _sdk_headers(client: openai.AsyncOpenAI) -> dict[str, str]:
    """The headers the SDK sends with every request, merged as it merges them: its bearer auth, then
    its platform headers and the profile's (which may replace the auth), names compared in any case."""
    merged: dict[str, str] = {}
    for source in (client.auth_headers, client.default_headers):
        for name, value in source.items():
            if isinstance(value, str):
                for same in [k for k in merged if k.lower() == name.lower()]:
                    del merged[same]
                merged[name] = value
    return merged


def chat_completion_or_raise(
    content: bytes,
    content_type: str | None,
    status: int,
    request_id: str | None = None,
    parsed: Any = NOT_PARSED,
    *,
    headers: Any = None,
) -> dict[str, Any]:
    """The body of a successful status as a chat completion, or `BadResponseError` saying what it
    is instead (not JSON, an HTML page, an array, no choices...), with the start of it kept; an
    `ErrorInAnswer` (a `BadResponseError` too) when it is an error object. `parsed`: the body's
    value when the caller has read it already."""

    def bad(problem: str) -> BadResponseError:
        text = " ".join(content[: BODY_EXCERPT_CHARS * 2].decode("utf-8", "replace").split())[:BODY_EXCERPT_CHARS]
        return BadResponseError(
            f"HTTP {status} but not a chat completion: {problem} "
            f"(content-type {content_type or 'none'}); body: {text!r}",
            status,
            request_id,
        )

    try:
        data = json.loads(content) if parsed is NOT_PARSED else parsed
    except ValueError:
        raise bad("the body is not JSON") from None
    if not isinstance(data, dict):
        raise bad(f"a JSON {type(data).__name__}, not an object")
    choices = data.get("choices")
    if not choices and isinstance(data.get("error"), dict):  # a relay's error sent with a 200
        where = f"an error object in an HTTP {status} answer"
        raise ErrorInAnswer(data["error"], headers if headers is not None else {}, where, status, request_id)
    if not isinstance(choices, list) or not choices:
        raise bad("no choices" if not choices else "choices is not a list")
    first = choices[0]
    if not isinstance(first, dict) or not isinstance(first.get("message"), dict):
        raise bad("choices[0] has no message")
    return data


def wire_body(body: dict[str, Any]) -> dict[str, Any]:
    """The JSON a chat completion sends: the job's body, its `extra_body` merged in (as the SDK does)."""
    extra = body.get("extra_body")
    if not extra:
        return body
    return {**{k: v for k, v in body.items() if k != "extra_body"}, **extra}


def _create_kwargs(body: dict[str, Any]) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    extra: dict[str, Any] = dict(body.get("extra_body") or {})
    for key, value in body.items():
        if key == "extra_body":
            continue
        if key in CREATE_PARAMS:
            kwargs[key] = value
        else:
            extra[key] = value
    if extra:
        kwargs["extra_body"] = extra
    return kwargs


def _rate_headers(headers: Any) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items() if k.lower().startswith("x-ratelimit-")}
