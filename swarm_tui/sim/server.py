"""The simulator's HTTP face: an aiohttp application speaking OpenAI's chat protocol.

Routes
    POST /v1/chat/completions, /chat/completions   the simulated model (plain and SSE)
    GET  /v1/models, /models                      the configured model ids
    GET  /health                                  {"status": "ok"}
    GET  /sim/stats                               counters (see ``Simulator.stats``)
    POST /sim/reset                               zero counters, forget bodies/cache/buckets
    GET  /sim/config, POST /sim/config            read / patch ``SimConfig`` fields (JSON)

Everything a request does is decided synchronously by ``core.Simulator.chat``; this
module only waits (latency, chunk delays, hangs) and writes. Waits are plain
``asyncio.sleep`` on the hot path; hangs and stalls also wake on the app's shutdown so a
server with hung requests in flight stops at once. No access log: a zero-latency sim must
sustain thousands of requests a second, and one log line each would cost more than the
request. The runner enables aiohttp's ``handler_cancellation`` so a client that gives up
on a hung request frees its handler.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

from . import errors
from .config import SimConfig
from .core import Reply, Simulator
from .sse import DONE, ChunkWriter

__all__ = ["create_app", "start_site", "SIM_KEY", "STOPPING_KEY"]

SIM_KEY: web.AppKey[Simulator] = web.AppKey("swarm_tui_sim", Simulator)
STOPPING_KEY: web.AppKey[asyncio.Event] = web.AppKey("swarm_tui_sim_stopping", asyncio.Event)

_JSON_CT = "application/json"


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _json(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=_dumps(obj), status=status, headers=headers, content_type=_JSON_CT)


async def _interruptible_sleep(app: web.Application, seconds: float) -> bool:
    """Sleep ``seconds`` unless the server stops first; True when it slept in full."""
    stopping = app[STOPPING_KEY]
    if stopping.is_set():
        return False
    try:
        await asyncio.wait_for(stopping.wait(), seconds)
    except TimeoutError:
        return True
    return False


# -- chat completions -----------------------------------------------------------------------


async def _chat(request: web.Request) -> web.StreamResponse:
    sim = request.app[SIM_KEY]
    raw = await request.read()
    reply = sim.chat(raw, request.headers.get("Authorization"))
    sim.in_flight += 1
    try:
        if reply.hang:
            sim.hung()
            if not await _interruptible_sleep(request.app, reply.delay_s):
                return _json(
                    {
                        "error": {
                            "message": "The simulator is shutting down.",
                            "type": "server_error",
                            "param": None,
                            "code": None,
                        }
                    },
                    503,
                    reply.headers,
                )
        elif reply.delay_s > 0:
            await asyncio.sleep(reply.delay_s)
        if reply.stream is not None:
            return await _stream(request, sim, reply)
        resp = _json(reply.body, reply.status, reply.headers)
        sim.finish(reply)
        return resp
    finally:
        sim.in_flight -= 1


async def _stream(request: web.Request, sim: Simulator, reply: Reply) -> web.StreamResponse:
    plan = reply.stream
    assert plan is not None
    headers = dict(reply.headers)
    headers["Content-Type"] = "text/event-stream; charset=utf-8"
    headers["Cache-Control"] = "no-cache"
    resp = web.StreamResponse(status=200, headers=headers)
    await resp.prepare(request)
    sim.stats_.streams += 1
    w = ChunkWriter(reply.meta, plan.include_usage)
    delay = sim.config.chunk_delay_ms / 1000.0
    # reasoning, then content, then tool-call deltas (only content for most answers)
    events = [w.piece(p) for p in plan.pieces]
    if plan.reasoning:
        events[:0] = [w.reasoning(p) for p in plan.reasoning]
    if plan.tool_deltas:
        events.extend(w.delta(d) for d in plan.tool_deltas)
    head = w.head_null() if plan.null_content else w.head()
    try:
        if plan.stall_after is None and delay <= 0:
            parts = [head, *events, w.finish(plan.finish_reason)]
            if plan.include_usage:
                parts.append(w.usage(plan.usage))
            await resp.write("".join(parts).encode("utf-8") + DONE)
        else:
            await resp.write(head.encode("utf-8"))
            for i, event in enumerate(events):
                if plan.stall_after is not None and i >= plan.stall_after:
                    sim.stalled()
                    # Stall, then end the body without finish_reason or [DONE].
                    await _interruptible_sleep(request.app, sim.config.hang_s)
                    return resp
                if delay > 0:
                    await asyncio.sleep(delay)
                await resp.write(event.encode("utf-8"))
            tail = w.finish(plan.finish_reason)
            if plan.include_usage:
                tail += w.usage(plan.usage)
            await resp.write(tail.encode("utf-8") + DONE)
        await resp.write_eof()
    except (ConnectionError, RuntimeError):
        return resp  # the client went away mid-stream: not a success
    sim.finish(reply)
    return resp


# -- the rest ------------------------------------------------------------------------------


async def _models(request: web.Request) -> web.Response:
    sim = request.app[SIM_KEY]
    key = sim.config.require_key
    if key is not None and request.headers.get("Authorization") != "Bearer " + key:
        status, body = errors.invalid_api_key(not request.headers.get("Authorization"))
        return _json(body, status)
    data = [{"id": m, "object": "model", "created": 1700000000, "owned_by": "swarm-tui-sim"} for m in sim.config.models]
    return _json({"object": "list", "data": data})


async def _health(request: web.Request) -> web.Response:
    return _json({"status": "ok", "simulated": True})


async def _stats(request: web.Request) -> web.Response:
    return _json(request.app[SIM_KEY].stats())


async def _reset(request: web.Request) -> web.Response:
    request.app[SIM_KEY].reset()
    return _json({"ok": True})


async def _get_config(request: web.Request) -> web.Response:
    return _json({"config": request.app[SIM_KEY].config.to_dict()})


async def _post_config(request: web.Request) -> web.Response:
    try:
        patch = await request.json()
        if not isinstance(patch, dict):
            raise ValueError("the body must be a JSON object of SimConfig fields")
        cfg = request.app[SIM_KEY].update_config(patch)
    except ValueError as e:
        return _json({"error": {"message": str(e), "type": "invalid_request_error", "param": None, "code": None}}, 400)
    return _json({"config": cfg.to_dict()})


async def _not_found(request: web.Request) -> web.Response:
    return _json(
        {
            "error": {
                "message": f"Invalid URL ({request.method} {request.path})",
                "type": "invalid_request_error",
                "param": None,
                "code": None,
            }
        },
        404,
    )


async def _on_shutdown(app: web.Application) -> None:
    app[STOPPING_KEY].set()


def create_app(sim: Simulator | SimConfig | None = None) -> web.Application:
    """The aiohttp application around ``sim`` (a Simulator, or a config to build one)."""
    if not isinstance(sim, Simulator):
        sim = Simulator(sim)
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app[SIM_KEY] = sim
    app[STOPPING_KEY] = asyncio.Event()
    r = app.router
    r.add_post("/v1/chat/completions", _chat)
    r.add_post("/chat/completions", _chat)
    r.add_get("/v1/models", _models)
    r.add_get("/models", _models)
    r.add_get("/health", _health)
    r.add_get("/sim/stats", _stats)
    r.add_post("/sim/reset", _reset)
    r.add_get("/sim/config", _get_config)
    r.add_post("/sim/config", _post_config)
    r.add_route("*", "/{tail:.*}", _not_found)
    app.on_shutdown.append(_on_shutdown)
    return app


async def start_site(
    sim: Simulator | SimConfig | None, host: str = "127.0.0.1", port: int = 0
) -> tuple[web.AppRunner, int]:
    """Start serving in the running loop; return the runner (``await runner.cleanup()``
    to stop) and the bound port."""
    app = create_app(sim)
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=2048)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    bound = runner.addresses[0][1]
    return runner, int(bound)
