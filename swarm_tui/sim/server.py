"""The simulator's HTTP face: an aiohttp application speaking OpenAI's chat protocol.

Routes
    POST /v1/chat/completions, /chat/completions   the simulated model (plain and SSE)
    GET  /v1/models, /models                      the configured model ids
    GET  /health                                  {"status": "ok"}
    GET  /sim/stats                               counters (see ``Simulator.stats``)
    POST /sim/reset                               zero counters, forget bodies/cache/buckets
    GET  /sim/config, POST /sim/config            read / patch ``SimConfig`` fields (JSON)

The Batch API (``batches.py``), each route also without the ``/v1`` prefix:
    POST   /v1/files                     upload (multipart: ``purpose``, ``file``); a ``batch``
                                         JSONL file is checked line by line (400 naming the line)
    GET    /v1/files                     list (``purpose`` filter)
    GET    /v1/files/{id}                the File object
    GET    /v1/files/{id}/content        the raw bytes (input, output and error files)
    DELETE /v1/files/{id}                forget a file
    POST   /v1/batches                   create (``input_file_id``, ``endpoint``, ``completion_window``)
    GET    /v1/batches                   list, newest first (``after``, ``limit``)
    GET    /v1/batches/{id}              the Batch object, brought up to the present
    POST   /v1/batches/{id}/cancel       cancelling, then cancelled
They answer 503 when the endpoint is ``down`` and 401 without the ``require_key``, as chat
does. A background pump brings unfinished batches up to the clock every
``_PUMP_TICK_S`` seconds, so their lines run spread over the batch's time.

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
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from aiohttp import BodyPartReader, web

from swarm_tui.sim import error_bodies
from swarm_tui.sim.batch_files import MAX_BYTES, PURPOSES
from swarm_tui.sim.config import SimConfig
from swarm_tui.sim.core import Simulator
from swarm_tui.sim.error_bodies import ApiError, bad_request_error
from swarm_tui.sim.reply import Reply
from swarm_tui.sim.request import endpoint_refusal
from swarm_tui.sim.sse import DONE, ChunkWriter

__all__ = ["create_app", "start_site", "SIM_KEY", "STOPPING_KEY"]

SIM_KEY: web.AppKey[Simulator] = web.AppKey("swarm_tui_sim", Simulator)
STOPPING_KEY: web.AppKey[asyncio.Event] = web.AppKey("swarm_tui_sim_stopping", asyncio.Event)
#: set when a batch is created: wakes the pump that sleeps while no batch is unfinished
BATCH_WAKE_KEY: web.AppKey[asyncio.Event] = web.AppKey("swarm_tui_sim_batch_wake", asyncio.Event)

#: how often the pump brings unfinished batches up to the clock
_PUMP_TICK_S = 0.05

_log = logging.getLogger(__name__)

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
    sim.entered()
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
        sim.left()


async def _stream(request: web.Request, sim: Simulator, reply: Reply) -> web.StreamResponse:
    plan = reply.stream
    assert plan is not None
    headers = dict(reply.headers)
    headers["Content-Type"] = "text/event-stream; charset=utf-8"
    headers["Cache-Control"] = "no-cache"
    resp = web.StreamResponse(status=200, headers=headers)
    await resp.prepare(request)
    sim.streamed()
    w = ChunkWriter(reply.meta, plan.include_usage)
    delay = max(sim.config.chunk_delay_ms / 1000.0, plan.piece_delay_s)
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


# -- the Batch API: files and batches ---------------------------------------------------------

_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _guarded(handler: _Handler) -> _Handler:
    """Refuse as chat does (down, key), and answer an ``ApiError`` as its JSON error."""

    async def guarded(request: web.Request) -> web.StreamResponse:
        denied = endpoint_refusal(request.app[SIM_KEY].config, request.headers.get("Authorization"))
        if denied is not None:
            return _json(denied[1], denied[0])
        try:
            return await handler(request)
        except ApiError as e:
            return _json(e.body, e.status)

    return guarded


async def _upload_file(request: web.Request) -> web.StreamResponse:
    if not request.content_type.startswith("multipart/"):
        raise bad_request_error("The request must be multipart/form-data with 'purpose' and 'file' fields.")
    try:
        reader = await request.multipart()
    except (ValueError, AssertionError) as e:
        raise bad_request_error(f"Could not parse the multipart body: {e}") from None
    purpose: str | None = None
    data: bytes | None = None
    filename = "upload"
    while True:
        part = await reader.next()
        if part is None:
            break
        if not isinstance(part, BodyPartReader):
            raise bad_request_error("Nested multipart bodies are not supported.")
        if part.name == "purpose":
            purpose = (await part.text()).strip()
        elif part.name == "file":
            filename = part.filename or filename
            buf = bytearray()
            while chunk := await part.read_chunk(1 << 20):
                buf += chunk
                if len(buf) > MAX_BYTES:
                    raise bad_request_error(f"The file is larger than {MAX_BYTES} bytes.", "file", "file_too_large")
            data = bytes(buf)
        else:
            await part.release()
    if purpose is None:
        raise bad_request_error("Missing required parameter: 'purpose'.", "purpose", "missing_required_parameter")
    if purpose not in PURPOSES:
        raise bad_request_error(
            f"Invalid value for 'purpose': {purpose!r}. Supported values are: " + ", ".join(map(repr, PURPOSES)),
            "purpose",
            "invalid_value",
        )
    if data is None:
        raise bad_request_error("Missing required parameter: 'file'.", "file", "missing_required_parameter")
    f = request.app[SIM_KEY].batches.upload(data, filename, purpose)
    return _json(f.obj())


async def _list_files(request: web.Request) -> web.StreamResponse:
    return _json(request.app[SIM_KEY].batches.list_files(request.query.get("purpose")))


async def _get_file(request: web.Request) -> web.StreamResponse:
    return _json(request.app[SIM_KEY].batches.file(request.match_info["file_id"]).obj())


async def _file_content(request: web.Request) -> web.StreamResponse:
    f = request.app[SIM_KEY].batches.file(request.match_info["file_id"])
    return web.Response(body=f.data, content_type="application/octet-stream")


async def _delete_file(request: web.Request) -> web.StreamResponse:
    return _json(request.app[SIM_KEY].batches.delete_file(request.match_info["file_id"]))


async def _create_batch(request: web.Request) -> web.StreamResponse:
    try:
        payload = await request.json()
    except ValueError:
        raise bad_request_error("We could not parse the JSON body of your request.") from None
    b = request.app[SIM_KEY].batches.create(payload, request.headers.get("Authorization"))
    request.app[BATCH_WAKE_KEY].set()
    return _json(b.obj())


async def _get_batch(request: web.Request) -> web.StreamResponse:
    return _json(request.app[SIM_KEY].batches.batch(request.match_info["batch_id"]).obj())


async def _cancel_batch(request: web.Request) -> web.StreamResponse:
    return _json(request.app[SIM_KEY].batches.cancel(request.match_info["batch_id"]).obj())


async def _list_batches(request: web.Request) -> web.StreamResponse:
    raw = request.query.get("limit", "20")
    try:
        limit = int(raw)
    except ValueError:
        raise bad_request_error(
            f"Invalid 'limit': expected an integer, got {raw!r}.", "limit", "invalid_type"
        ) from None
    if not 1 <= limit <= 100:
        raise bad_request_error(
            f"Invalid 'limit': expected a value from 1 to 100, got {limit}.", "limit", "invalid_value"
        )
    return _json(request.app[SIM_KEY].batches.list_batches(request.query.get("after"), limit))


async def _batch_pump(app: web.Application) -> None:
    """Bring unfinished batches up to the clock every tick; sleep while there are none."""
    wake = app[BATCH_WAKE_KEY]
    while True:
        try:
            unfinished = app[SIM_KEY].batches.advance_all()
        except Exception:  # a bug must not stop every later batch
            _log.exception("the simulator's batch pump failed")
            unfinished = 1
        if unfinished:
            await asyncio.sleep(_PUMP_TICK_S)
        else:
            wake.clear()
            await wake.wait()


async def _pump_ctx(app: web.Application) -> AsyncIterator[None]:
    task = asyncio.create_task(_batch_pump(app), name="swarm-tui-sim-batch-pump")
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


# -- the rest ------------------------------------------------------------------------------


async def _models(request: web.Request) -> web.Response:
    sim = request.app[SIM_KEY]
    key = sim.config.require_key
    if key is not None and request.headers.get("Authorization") != "Bearer " + key:
        status, body = error_bodies.invalid_api_key(not request.headers.get("Authorization"))
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
    app[BATCH_WAKE_KEY] = asyncio.Event()
    r = app.router
    r.add_post("/v1/chat/completions", _chat)
    r.add_post("/chat/completions", _chat)
    r.add_get("/v1/models", _models)
    r.add_get("/models", _models)
    for prefix in ("/v1", ""):
        r.add_post(f"{prefix}/files", _guarded(_upload_file))
        r.add_get(f"{prefix}/files", _guarded(_list_files))
        r.add_get(f"{prefix}/files/{{file_id}}", _guarded(_get_file))
        r.add_delete(f"{prefix}/files/{{file_id}}", _guarded(_delete_file))
        r.add_get(f"{prefix}/files/{{file_id}}/content", _guarded(_file_content))
        r.add_post(f"{prefix}/batches", _guarded(_create_batch))
        r.add_get(f"{prefix}/batches", _guarded(_list_batches))
        r.add_get(f"{prefix}/batches/{{batch_id}}", _guarded(_get_batch))
        r.add_post(f"{prefix}/batches/{{batch_id}}/cancel", _guarded(_cancel_batch))
    r.add_get("/health", _health)
    r.add_get("/sim/stats", _stats)
    r.add_post("/sim/reset", _reset)
    r.add_get("/sim/config", _get_config)
    r.add_post("/sim/config", _post_config)
    r.add_route("*", "/{tail:.*}", _not_found)
    app.on_shutdown.append(_on_shutdown)
    app.cleanup_ctx.append(_pump_ctx)
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
