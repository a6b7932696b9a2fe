"""A run against an OpenAI-compatible server that is not the project's simulator.

The server below speaks another dialect on purpose, the way real relays and local servers do:
no x-ratelimit headers, a fixed-window rate limit whose 429 says `rate_limit_error` with no
code, 503s with an HTML body, 500s whose JSON has no `error` wrapper, calls that hang, usage in
DeepSeek's shape (`prompt_cache_hit_tokens`), and its own answer format. Nothing in the engine
may depend on the simulator's habits.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from collections import Counter

import pytest
from aiohttp import web

from tests.conftest import read_jsonl, run_cli, write_batch


class ForeignServer:
    """A small aiohttp server on loopback, in its own thread and loop."""

    WINDOW_S = 1.0
    PER_WINDOW = 60  # 3,600 RPM in fixed one-second windows

    def __init__(self) -> None:
        self.successes: Counter[str] = Counter()
        self.requests = 0
        self.statuses: Counter[int] = Counter()
        self.seen: Counter[str] = Counter()
        self._window = (0, 0)
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self.port = 0

    def _fault(self, prompt: str) -> str | None:
        """A deterministic fate for the n-th sighting of a prompt: first tries fail often."""
        n = self.seen[prompt]
        self.seen[prompt] += 1
        if n >= 2:
            return None
        roll = int(hashlib.sha256(f"{prompt}#{n}".encode()).hexdigest(), 16) % 100
        return {
            0: "hang",
            1: "hang",
            2: "html503",
            3: "html503",
            4: "html503",
            5: "bare500",
            6: "bare500",
            7: "bare500",
        }.get(roll)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        body = await request.json()
        prompt = body["messages"][-1]["content"]
        window = int(time.monotonic() / self.WINDOW_S)
        start, used = self._window
        used = used + 1 if start == window else 1
        self._window = (window, used)
        if used > self.PER_WINDOW:
            self.statuses[429] += 1
            return web.json_response(
                {"error": {"message": "Too many requests, slow down.", "type": "rate_limit_error"}},
                status=429,
                headers={"Retry-After": "1"},
            )
        fate = self._fault(prompt)
        if fate == "hang":
            await asyncio.sleep(30)
        if fate == "html503":
            self.statuses[503] += 1
            return web.Response(
                status=503, text="<html><body><h1>503 Service Unavailable</h1></body></html>", content_type="text/html"
            )
        if fate == "bare500":
            self.statuses[500] += 1
            return web.json_response({"message": "internal failure", "status": 500}, status=500)
        await asyncio.sleep(0.005)
        self.statuses[200] += 1
        self.successes[prompt] += 1
        answer = f"ECHO<<{prompt}>>"
        return web.json_response(
            {
                "id": f"gen-{hashlib.md5(prompt.encode()).hexdigest()[:12]}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "foreign"),
                "system_fingerprint": "fp_foreign",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": answer},
                        "finish_reason": "stop",
                        "logprobs": None,
                    }
                ],
                "usage": {
                    "prompt_tokens": 12,
                    "completion_tokens": 5,
                    "total_tokens": 17,
                    "prompt_cache_hit_tokens": 8,
                    "prompt_cache_miss_tokens": 4,
                },
            }
        )

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_post("/api/v1/chat/completions", self._chat)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        self._loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]
        self._started.set()
        self._loop.run_forever()

    def __enter__(self) -> ForeignServer:
        self._thread.start()
        self._started.wait(10)
        return self

    def __exit__(self, *exc) -> None:
        async def stop() -> None:
            hung = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in hung:  # handlers still sleeping in a hang
                task.cancel()
            await asyncio.gather(*hung, return_exceptions=True)
            await self._runner.cleanup()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v1"


@pytest.fixture
def foreign():
    with ForeignServer() as server:
        yield server


def test_300_tasks_against_a_server_in_another_dialect_all_get_their_own_answer(tmp_path, foreign):
    prompts = [f"foreign task {i}" for i in range(300)]
    job = write_batch(tmp_path / "job.jsonl", prompts, model="foreign-model")
    result = run_cli(
        "run",
        str(job),
        "--headless",
        "--base-url",
        foreign.base_url,
        "--out",
        str(tmp_path / "run"),
        "--timeout",
        "1.5",
        "--max-attempts",
        "6",
        "--hedge",
        timeout=180,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    # every kind of trouble happened, and was survived
    assert foreign.statuses[503] > 0 and foreign.statuses[500] > 0
    answers = {
        line["custom_id"]: line["response"]["body"]["choices"][0]["message"]["content"]
        for line in read_jsonl(tmp_path / "run" / "results.jsonl")
    }
    assert answers == {f"task-{i:04d}": f"ECHO<<{prompt}>>" for i, prompt in enumerate(prompts)}
    assert read_jsonl(tmp_path / "run" / "errors.jsonl") == []
    assert max(foreign.successes.values()) <= 2  # a hedged pair can both succeed; never more
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    # DeepSeek's cache field is read: 8 cached tokens in every answer that reached the client
    assert summary["tokens"]["cached"] >= 8 * 300 and summary["tokens"]["cached"] % 8 == 0
    assert summary["requests"]["server_errors"] == foreign.statuses[503] + foreign.statuses[500]
    assert summary["requests"]["rate_limited"] == foreign.statuses[429]
