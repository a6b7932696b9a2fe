"""A small hostile OpenAI-compatible server on loopback, for the faults a real relay can show.

Each request's fate is chosen by a marker in its last message, `[[hostile:NAME]]` (or
`[[hostile:NAMExN]]`: only the first N requests carrying it, then a normal answer), so one job
can mix them. Names:

    nochoices    200 {"id": ..., "object": "chat.completion"} without `choices`
    emptychoices 200 with `choices: []`
    badjson      200 whose body is not JSON
    plain        200 text/plain prose
    array        200 with a JSON array
    html         200 with an HTML page (a captive portal, a login page)
    redirect302  302 to `other` (another server)
    redirect307  307 to `other`
    ra999999     429 with `retry-after: 999999`
    rainf        429 with `retry-after: inf`
    rams1e12     429 with `retry-after-ms: 1e12`
    noretry      503 with `x-should-retry: false`
    reset        the connection is closed without an answer
    pretty       200 with the chat completion pretty-printed (newlines, indentation) and a unicode escape
    nousage      200 with a chat completion that has no `usage` (some relays and local servers)
    lengthnull   200 with `finish_reason: length` and `content: null` (tokens spent thinking)
    lengthcut    200 with `finish_reason: length` and half an answer
    latin1       200 declared `application/json; charset=latin-1` (a stream: `text/event-stream;
                 charset=latin-1`), its content's "café" written in Latin-1
    klingon      200 declared `application/json; charset=klingon`: a charset no decoder knows
    endless      200 whose answer never ends: a body of `x` without end (a stream: content chunks
                 without end), until the client goes away
    endlessline  a stream whose one `data:` line never ends
    endless500   500 whose error body never ends

Any other request gets a normal chat completion (a stream of its chunks when it asks for one),
unless the server was started with `always=NAME`: then every request without a marker of its own
meets NAME (a provider that answers every call so). `requests` counts what arrived, by path and
method; `answered` counts the normal answers per prompt (what a user would pay for).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
import uuid
from collections import Counter

from aiohttp import web

_MARKER = re.compile(r"\[\[hostile:([a-z0-9]+?)(?:x(\d+))?\]\]")


def completion(prompt: str, model: str = "hostile-1") -> dict:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": f"answer to {prompt[:40]}"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


class HostileServer:
    def __init__(self, *, other_url: str = "http://127.0.0.1:9/elsewhere", always: str | None = None) -> None:
        self.other_url = other_url
        self.always = always
        self.requests: Counter[str] = Counter()
        self.answered: Counter[str] = Counter()
        self.seen: Counter[str] = Counter()
        self.endless_started = 0
        """How many answers without end were begun (each request that got one)."""
        self.endless_bytes = 0
        """How many bytes of them were written (what the clients were made to read)."""
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> HostileServer:
        self._thread.start()
        if not self._started.wait(10):
            raise RuntimeError("the hostile server did not start")
        return self

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app)
        self._loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._started.set()
        self._loop.run_forever()
        self._loop.run_until_complete(runner.cleanup())

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.requests[f"{request.method} {request.path}"] += 1
        if request.method != "POST" or not request.path.endswith("/chat/completions"):
            return web.Response(
                status=200, text="<html><body>another server's page</body></html>", content_type="text/html"
            )
        body = await request.json()
        prompt = str(body["messages"][-1]["content"])
        fate = self._fate(prompt) or self.always
        if fate in ENDLESS or fate == "latin1":
            return await self._hostile_bytes(request, fate, prompt, body)
        match fate:
            case None if body.get("stream"):
                self.answered[prompt] += 1
                return await self._stream(request, completion(prompt, body.get("model", "hostile-1")))
            case None:
                self.answered[prompt] += 1
                return web.json_response(completion(prompt, body.get("model", "hostile-1")))
            case "klingon":
                data = json.dumps(completion(prompt, body.get("model", "hostile-1"))).encode()
                return web.Response(
                    status=200, body=data, headers={"content-type": "application/json; charset=klingon"}
                )
            case "nochoices":
                return web.json_response({"id": "x", "object": "chat.completion", "created": 1})
            case "emptychoices":
                return web.json_response({"id": "x", "object": "chat.completion", "choices": []})
            case "badjson":
                return web.Response(status=200, text='{"id": "x", "choices": [', content_type="application/json")
            case "plain":
                return web.Response(status=200, text="Sure! Here is your answer.", content_type="text/plain")
            case "array":
                return web.json_response([completion(prompt)])
            case "html":
                return web.Response(
                    status=200, text="<!doctype html><title>Sign in</title><p>Please log in", content_type="text/html"
                )
            case "redirect302" | "redirect307":
                raise (web.HTTPFound if fate == "redirect302" else web.HTTPTemporaryRedirect)(self.other_url)
            case "ra999999" | "rainf" | "rams1e12":
                header = {
                    "ra999999": ("retry-after", "999999"),
                    "rainf": ("retry-after", "inf"),
                    "rams1e12": ("retry-after-ms", "1e12"),
                }[fate]
                return web.json_response(
                    {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}},
                    status=429,
                    headers=dict([header]),
                )
            case "noretry":
                return web.json_response(
                    {"error": {"message": "overloaded", "type": "server_error"}},
                    status=503,
                    headers={"x-should-retry": "false"},
                )
            case "pretty":
                self.answered[prompt] += 1
                body = completion(prompt, body.get("model", "hostile-1"))
                body["choices"][0]["message"]["content"] += " caf\u00e9"
                return web.Response(status=200, text=json.dumps(body, indent=2), content_type="application/json")
            case "nousage" | "lengthnull" | "lengthcut":
                self.answered[prompt] += 1
                body = completion(prompt, body.get("model", "hostile-1"))
                if fate == "nousage":
                    del body["usage"]
                else:
                    choice = body["choices"][0]
                    choice["finish_reason"] = "length"
                    choice["message"]["content"] = None if fate == "lengthnull" else "The answer begins and then"
                return web.json_response(body)
            case "reset":
                assert request.transport is not None
                request.transport.close()
                return web.Response(status=500)
        raise AssertionError(fate)

    async def _hostile_bytes(self, request: web.Request, fate: str, prompt: str, body: dict) -> web.StreamResponse:
        """The fates written chunk by chunk: a declared charset, and answers without end."""
        answer = completion(prompt, body.get("model", "hostile-1"))
        if fate == "latin1":
            self.answered[prompt] += 1
            answer["choices"][0]["message"]["content"] += " caf\u00e9"
            if body.get("stream"):
                return await self._stream(request, answer, charset="latin-1")
            data = json.dumps(answer, ensure_ascii=False).encode("latin-1")
            return web.Response(status=200, body=data, headers={"content-type": "application/json; charset=latin-1"})
        streamed = body.get("stream") and fate != "endless500"
        response = web.StreamResponse(
            status=500 if fate == "endless500" else 200,
            headers={"content-type": "text/event-stream" if streamed else "application/json"},
        )
        await response.prepare(request)
        self.endless_started += 1
        if fate == "endlessline":
            start, piece = b'data: {"choices": [{"index": 0, "delta": {"content": "', b"x" * 65536
        elif streamed:
            start, piece = (
                _sse_chunk(answer, {"role": "assistant", "content": ""}),
                _sse_chunk(answer, {"content": "x" * 1024}),
            )
        else:
            start, piece = b'{"id": "chatcmpl-endless", "choices": [{"index": 0, "message": {"content": "', b"x" * 65536
        with contextlib.suppress(ConnectionError, RuntimeError):  # the client went away: the end
            await response.write(start)
            while request.transport is not None and not request.transport.is_closing():
                await response.write(piece)
                self.endless_bytes += len(piece)
        return response

    async def _stream(self, request: web.Request, answer: dict, charset: str = "utf-8") -> web.StreamResponse:
        """`answer` as a stream of chat.completion.chunk events (two content pieces, a usage chunk)."""
        response = web.StreamResponse(headers={"content-type": f"text/event-stream; charset={charset}"})
        await response.prepare(request)
        text = answer["choices"][0]["message"]["content"]
        half = len(text) // 2
        for delta, finish in (
            ({"role": "assistant", "content": text[:half]}, None),
            ({"content": text[half:]}, "stop"),
        ):
            await response.write(_sse_chunk(answer, delta, finish, charset=charset))
        usage = {**answer, "choices": [], "usage": answer["usage"]}
        await response.write(f"data: {json.dumps(usage)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        return response

    def _fate(self, prompt: str) -> str | None:
        match = _MARKER.search(prompt)
        if match is None:
            return None
        name, times = match.group(1), match.group(2)
        key = match.group(0)
        self.seen[key] += 1
        if times is not None and self.seen[key] > int(times):
            return None
        return name


ENDLESS = frozenset({"endless", "endlessline", "endless500"})


def _sse_chunk(answer: dict, delta: dict, finish: str | None = None, *, charset: str = "utf-8") -> bytes:
    chunk = {
        "id": answer["id"],
        "object": "chat.completion.chunk",
        "created": answer["created"],
        "model": answer["model"],
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode(charset)
