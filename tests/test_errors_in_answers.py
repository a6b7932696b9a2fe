"""Errors a provider sends inside an answer, and errors in bodies that are not OpenAI's, on both
backends against real servers on loopback.

* A streamed answer that breaks off with an SSE `error` event is the same error as one sent as a
  status: a server error is retried, a rate limit paced with the stream's Retry-After; what was
  streamed before it is never kept as an answer.
* An HTML 502 page or FastAPI's `{"detail": ...}` keeps its words in errors.jsonl and in the
  attempts the error log shows (not a bare "HTTP 502"), cut to a line, secrets masked.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter

import pytest
from aiohttp import web
from swarm_tui.core.call_errors import ErrorClass
from swarm_tui.providers.client import ProviderClient
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.providers.words import PROVIDER_WORDS_CHARS

from tests.conftest import read_jsonl, run_cli, write_batch
from tests.servers import ThreadedApp, clear_proxy_env

KEY = "sk-test-ECHOED-0123456789abcdef"


def chunk(delta: dict, finish: str | None = None) -> str:
    data = {
        "id": "chatcmpl-s",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(data)}\n\n"


ERROR_EVENTS = {
    # OpenAI's shape, as an `event: error` (Anthropic-compatible relays) ...
    "server": 'event: error\ndata: {"error": {"message": "The server had an error while streaming", '
    '"type": "server_error", "code": null}}\n\n',
    # ... OpenRouter's: a data line with an error and a numeric code
    "openrouter": 'data: {"error": {"code": 502, "message": "Upstream provider failed mid-stream"}, '
    '"choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}]}\n\n',
    "rate": 'event: error\ndata: {"error": {"message": "Rate limit reached for requests", '
    '"type": "requests", "code": "rate_limit_exceeded"}}\n\n',
    "overloaded": 'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", '
    '"message": "Overloaded"}}\n\n',
}


class ScriptedServer:
    """A chat endpoint whose answer is chosen by the prompt: `stream-error:KIND` breaks the first
    stream of each prompt off with ERROR_EVENTS[KIND] (the second is whole); `html502`, `detail400`
    and `long502` answer those bodies on every try."""

    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.chat)
        self.server = ThreadedApp(app)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        prompt = body["messages"][-1]["content"]
        self.requests[prompt] += 1
        if "html502" in prompt:
            page = (
                "<!DOCTYPE html><html><head><title>relay.example | 502: Bad gateway</title>"
                "<style>body{color:red}</style></head><body><h1>Bad gateway</h1>"
                "<p>The web server reported a bad gateway error.</p></body></html>"
            )
            return web.Response(status=502, text=page, content_type="text/html")
        if "detail400" in prompt:
            return web.json_response({"detail": f"Unsupported parameter: 'logit_bias' (key {KEY})"}, status=400)
        if "long502" in prompt:
            text = "\n  upstream \t failed: " + "x" * 5000 + "\nsecond line"
            return web.Response(status=502, text=text, content_type="text/plain")
        if body.get("stream"):
            kind = prompt.split("stream-error:")[1].split()[0] if "stream-error:" in prompt else None
            response = web.StreamResponse(
                headers={
                    "Content-Type": "text/event-stream",
                    "retry-after": "0.2",
                    "x-ratelimit-remaining-requests": "0",
                }
            )
            await response.prepare(request)
            await response.write(chunk({"role": "assistant", "content": "partial "}).encode())
            if kind is not None and self.requests[prompt] == 1:
                await response.write(ERROR_EVENTS[kind].encode())
                await response.write(b"data: [DONE]\n\n")
                return response
            await response.write((chunk({"content": f"whole answer to {prompt}"}) + chunk({}, "stop")).encode())
            await response.write(b"data: [DONE]\n\n")
            return response
        return web.json_response(
            {
                "id": "c",
                "object": "chat.completion",
                "created": 1,
                "model": "m",
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "fine"}}],
            }
        )


@pytest.fixture
def scripted(monkeypatch):
    clear_proxy_env(monkeypatch)
    server = ScriptedServer()
    server.server.start()
    yield server
    server.server.stop()


def journal_attempts(run_dir) -> list[tuple]:
    with sqlite3.connect(f"file:{run_dir / 'journal.sqlite'}?mode=ro", uri=True) as db:
        return db.execute(
            "SELECT idx, number, error_class, error_message FROM attempts ORDER BY idx, number"
        ).fetchall()


@pytest.mark.parametrize("kind", ["server", "openrouter"])
def test_a_stream_broken_off_by_an_error_event_is_retried_and_the_second_answer_kept(tmp_path, scripted, backend, kind):
    prompts = [f"task {i} stream-error:{kind}" for i in range(5)]
    job = write_batch(tmp_path / "job.jsonl", prompts)
    run_dir = tmp_path / "run"
    result = run_cli(
        "run",
        str(job),
        "--headless",
        "--base-url",
        scripted.server.base_url,
        "--backend",
        backend,
        "--stream",
        "--out",
        str(run_dir),
        "--max-attempts",
        "3",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert scripted.requests == Counter({prompt: 2 for prompt in prompts}), "5 tasks: 10 requests, each retried once"
    answers = {
        row["custom_id"]: row["response"]["body"]["choices"][0]["message"]["content"]
        for row in read_jsonl(run_dir / "results.jsonl")
    }
    assert answers == {f"task-{i:04d}": f"partial whole answer to {prompt}" for i, prompt in enumerate(prompts)}
    assert read_jsonl(run_dir / "errors.jsonl") == []
    first_tries = [row for row in journal_attempts(run_dir) if row[1] == 1]
    assert [row[2] for row in first_tries] == ["server_error"] * 5, first_tries
    assert all("error event in the stream" in row[3] for row in first_tries), first_tries


@pytest.mark.parametrize(
    "kind, expected",
    [("rate", ErrorClass.RATE_LIMIT), ("server", ErrorClass.SERVER), ("overloaded", ErrorClass.SERVER)],
)
async def test_an_error_event_is_classified_as_the_same_error_sent_as_a_status(scripted, backend, kind, expected):
    profile = ProviderProfile("custom", base_url=scripted.server.base_url, backend=backend)
    client = ProviderClient(profile, scripted.server.base_url)
    try:
        with pytest.raises(Exception) as caught:
            await client.complete(
                {"model": "m", "messages": [{"role": "user", "content": f"stream-error:{kind} x"}]}, stream=True
            )
        error = client.classify(caught.value)
    finally:
        await client.aclose()
    assert (error.kind, error.retryable, error.status) == (expected, True, 200), error
    assert error.retry_after_s == 0.2, "the stream's own Retry-After is read"
    assert error.rate_headers == {"x-ratelimit-remaining-requests": "0"}
    assert error.is_rate_limit == (kind == "rate")
    assert "error event in the stream" in error.message and "Traceback" not in error.message


async def test_a_200_whose_body_is_an_error_object_is_classified_as_that_error(backend, monkeypatch):
    clear_proxy_env(monkeypatch)

    async def chat(request: web.Request) -> web.Response:
        return web.json_response(
            {"error": {"message": "Rate limit exceeded: free-models-per-min", "code": 429}},
            headers={"retry-after": "3"},
        )

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    server = ThreadedApp(app).start()
    client = ProviderClient(ProviderProfile("relay", base_url=server.base_url, backend=backend), server.base_url)
    try:
        with pytest.raises(Exception) as caught:
            await client.complete({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        error = client.classify(caught.value)
    finally:
        await client.aclose()
        server.stop()
    assert (error.kind, error.retry_after_s, error.status) == (ErrorClass.RATE_LIMIT, 3.0, 200), error
    assert error.message.startswith("Rate limit exceeded: free-models-per-min")


# --------------------------------------------------------------------------- the provider's words


def test_an_html_502_and_a_detail_400_keep_the_providers_words_in_errors_jsonl(tmp_path, scripted, backend):
    job = write_batch(tmp_path / "job.jsonl", ["a html502", "b detail400", "c long502"])
    run_dir = tmp_path / "run"
    result = run_cli(
        "run",
        str(job),
        "--headless",
        "--base-url",
        scripted.server.base_url,
        "--backend",
        backend,
        "--api-key-env",
        "RELAY_KEY",
        "--out",
        str(run_dir),
        "--max-attempts",
        "2",
        env={"RELAY_KEY": KEY},
    )
    assert result.returncode == 1, result.stderr[-3000:]
    errors = {row["custom_id"]: row for row in read_jsonl(run_dir / "errors.jsonl")}
    html, detail, long = (errors[f"task-000{i}"]["error"] for i in range(3))
    assert html["message"] == "HTTP 502: relay.example | 502: Bad gateway"
    assert (html["code"], errors["task-0000"]["response"]["status_code"]) == ("server_error", 502)
    assert detail["message"] == "HTTP 400: Unsupported parameter: 'logit_bias' (key ***)", "the key is masked"
    assert detail["code"] == "bad_request"
    assert long["message"].startswith("HTTP 502: upstream failed: xxx") and "second" not in long["message"]
    assert len(long["message"]) <= len("HTTP 502: ") + PROVIDER_WORDS_CHARS
    # the attempts the error log shows carry the same words
    by_task = {idx: message for idx, _, _, message in journal_attempts(run_dir)}
    assert by_task[0] == html["message"] and by_task[1] == detail["message"]
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


@pytest.mark.parametrize(
    "status, body, expected",
    [
        (502, "<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>", "HTTP 502 Bad Gateway"),
        (
            503,
            "<html><body><h1>503 Service Unavailable</h1><p>No server is available</p></body></html>",
            "HTTP 503 Service Unavailable",
        ),
        (
            500,
            "<html><body><script>x()</script><p>Internal &amp; upstream error</p></body></html>",
            "HTTP 500: Internal & upstream error",
        ),
        (400, {"detail": "Unsupported parameter: 'n'"}, "HTTP 400: Unsupported parameter: 'n'"),
        (
            422,
            {"detail": [{"loc": ["body", "model"], "msg": "field required"}, {"loc": ["body", "n"], "msg": "bad"}]},
            "HTTP 422: body.model: field required; body.n: bad",
        ),
        (429, {"error": "Too many requests, slow down"}, "HTTP 429: Too many requests, slow down"),
        (500, {"message": "internal failure", "status": 500}, "internal failure"),  # its message, as before
        (504, "", "HTTP 504 Gateway Timeout"),
        (599, None, "HTTP 599"),
    ],
)
def test_the_words_an_error_body_carries(status, body, expected):
    from swarm_tui.providers.classify import classify_reply

    assert classify_reply(status, body).message == expected
