"""The simulator, over real HTTP on loopback (httpx and the official openai SDK).

Each test starts its own thread-mode server on a free port, so tests are independent and
the whole file runs in a few seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time

import httpx
import openai
import pytest
from swarm_tui.sim import SimConfig, SimServer, add_arguments, config_from_args
from swarm_tui.sim.answers import build_answer, split_pieces
from swarm_tui.sim.args import config_to_argv
from swarm_tui.sim.draws import request_key
from swarm_tui.sim.faults import find_marker
from swarm_tui.sim.prefix_cache import PrefixCache
from swarm_tui.sim.rate_limits import RateLimiter, TokenBucket, openai_duration
from swarm_tui.sim.tokens import estimate_tokens

from tests.helpers import wait_until


@pytest.fixture
def make_sim():
    servers: list[SimServer] = []

    def make(**fields) -> SimServer:
        fields.setdefault("latency_ms", 0.0)
        sim = SimServer(SimConfig(**fields)).start()
        servers.append(sim)
        return sim

    yield make
    for s in servers:
        s.stop()


def body(prompt: str, **extra) -> dict:
    return {"model": "sim-test", "messages": [{"role": "user", "content": prompt}], **extra}


def post(sim: SimServer, payload: dict, headers: dict | None = None, timeout: float = 5.0) -> httpx.Response:
    with httpx.Client(trust_env=False, timeout=timeout) as c:
        return c.post(sim.base_url + "/chat/completions", json=payload, headers=headers)


def sdk(sim: SimServer, **kw) -> openai.AsyncOpenAI:
    kw.setdefault("api_key", "sk-test")
    return openai.AsyncOpenAI(base_url=sim.base_url, max_retries=0, **kw)


# -- pure behaviour ------------------------------------------------------------------------


def test_estimate_tokens_and_answer_accounting():
    assert estimate_tokens("") == 1
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    assert estimate_tokens("é" * 4) == 2  # 8 bytes of UTF-8
    for target in (1, 5, 16, 120, 3000):
        for u in (0.0, 0.37, 0.999):
            content, n, finish = build_answer("write a haiku", target, u, None)
            assert content.startswith("Sim answer to: write a haiku")
            assert n == estimate_tokens(content) and finish == "stop"
            assert "  " not in content and not content.endswith(" ")
    content, n, finish = build_answer("x" * 50, 100, 0.5, 7)
    assert (n, finish) == (7, "length") and n == estimate_tokens(content)
    content, n, finish = build_answer("ünïcödé " * 30, 100, 0.5, 9)
    assert n == estimate_tokens(content) <= 9 and finish == "length"
    text = "Sim answer to: a  b\nc  "
    assert "".join(split_pieces(text)) == text


def test_token_bucket_with_fake_clock():
    now = [100.0]
    lim = RateLimiter(rpm=120, tpm=None, burst_s=1.0, clock=lambda: now[0])
    assert lim.admit(10).ok and lim.admit(10).ok  # capacity 2 requests
    adm = lim.admit(10)
    assert not adm.ok and adm.kind == "requests" and adm.wait_s == pytest.approx(0.5)
    now[0] += 0.25
    assert lim.admit(10).wait_s == pytest.approx(0.25)  # refused requests are not charged
    now[0] += 0.25
    assert lim.admit(10).ok
    h = lim.headers()
    assert h["x-ratelimit-limit-requests"] == "120"
    assert h["x-ratelimit-remaining-requests"] == "0"
    assert h["x-ratelimit-reset-requests"] == "1s"

    tl = RateLimiter(rpm=None, tpm=600, burst_s=1.0, clock=lambda: now[0])  # 10 tok/s, cap 10
    assert tl.admit(50).ok  # bigger than the bucket but under the limit: admitted when full
    adm = tl.admit(5)
    assert not adm.ok and adm.kind == "tokens"
    assert adm.wait_s == pytest.approx((5 - (10 - 50)) / 10)
    big = tl.admit(601)
    assert not big.ok and big.too_large

    b = TokenBucket(rate=1.0, capacity=3.0, now=0.0)
    b.take(3, 0.0)
    assert b.wait_time(1, 0.0) == pytest.approx(1.0)
    assert b.wait_time(1, 10.0) == 0.0 and b.remaining(10.0) == 3


def test_openai_duration_format():
    assert openai_duration(0.012) == "12ms"
    assert openai_duration(0.0) == "0ms"
    assert openai_duration(1.0) == "1s"
    assert openai_duration(2.4) == "2.4s"
    assert openai_duration(360.0) == "6m0s"
    assert openai_duration(3723.5) == "1h2m3.5s"


def test_markers_and_request_key():
    assert find_marker("do it [[sim:500x2]] now").code == "500"
    m = find_marker("[[sim:hangx1]]")
    assert (m.code, m.times, m.applies(0), m.applies(1)) == ("hang", 1, True, False)
    assert find_marker("[[sim:quota]]").times is None
    sequence = find_marker("first [[sim:hang,500,quota]]")
    assert [sequence.code_at(i) for i in range(3)] == ["hang", "500", "quota"] and not sequence.applies(3)
    assert find_marker("no marker [[sim:foo]]") is None
    a = body("x", stream=True, stream_options={"include_usage": True})
    assert request_key(a) == request_key(body("x")) != request_key(body("y"))


def test_prefix_cache_rounds_to_64():
    cache = PrefixCache(min_tokens=128)
    sys_msg = {"role": "system", "content": "s" * 1000}  # 250 tokens + 4
    assert cache.observe([sys_msg, {"role": "user", "content": "a"}]) == 0
    assert cache.observe([sys_msg, {"role": "user", "content": "b"}]) == 192
    short = {"role": "system", "content": "s" * 100}
    assert cache.observe([short, {"role": "user", "content": "a"}]) == 0
    assert cache.observe([short, {"role": "user", "content": "b"}]) == 0


def test_cli_flags_round_trip():
    cfg = SimConfig(
        latency_ms=3.5,
        rpm=100,
        tpm=None,
        error_rate=0.1,
        hang_rate=0.05,
        output_tokens=(4, 9),
        seed=42,
        context_window=2048,
        down=True,
        models=("a", "b"),
    )
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    ns = parser.parse_args(["--port", "0", *config_to_argv(cfg)])
    assert config_from_args(ns) == cfg and ns.port == 0
    ns = parser.parse_args(["--rpm", "0", "--error-rate", "0.2"])
    got = config_from_args(ns)
    assert got.rpm is None and got.error_rate == 0.2 and got.latency_ms == 40.0
    with pytest.raises(SystemExit):  # argparse refuses it, naming the flag
        parser.parse_args(["--error-rate", "2"])
    with pytest.raises(ValueError, match="error_rate"):
        config_from_args(parser.parse_args(["--error-rate", "0.5"]), SimConfig(hang_rate=0.6))


# -- over HTTP ------------------------------------------------------------------------------


async def test_plain_completion_via_sdk(make_sim):
    sim = make_sim()
    client = sdk(sim)
    raw = await client.chat.completions.with_raw_response.create(
        model="my-model",
        messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": "task 17: count to three"}],
    )
    assert raw.headers["x-request-id"].startswith("req_")
    assert "x-ratelimit-limit-requests" not in raw.headers  # no limits configured
    c = raw.parse()
    assert c.object == "chat.completion" and c.id.startswith("chatcmpl-")
    assert c.model == "my-model"
    msg = c.choices[0].message
    assert msg.role == "assistant"
    assert msg.content.startswith("Sim answer to: task 17: count to three")
    assert c.choices[0].finish_reason == "stop"
    u = c.usage
    assert u.completion_tokens == estimate_tokens(msg.content)
    assert 16 <= u.completion_tokens <= 121
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens
    assert u.prompt_tokens_details.cached_tokens == 0
    assert u.completion_tokens_details.reasoning_tokens == 0

    capped = await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "long one"}], max_tokens=5
    )
    assert capped.choices[0].finish_reason == "length"
    assert capped.usage.completion_tokens == 5
    models = await client.models.list()
    assert [m.id for m in models.data] == ["sim-1"]
    await client.close()


async def test_streaming_via_sdk_with_usage(make_sim):
    sim = make_sim(chunk_delay_ms=1.0)
    client = sdk(sim)
    messages = [{"role": "user", "content": "stream task 3"}]
    stream = await client.chat.completions.create(
        model="m", messages=messages, stream=True, stream_options={"include_usage": True}
    )
    text, finish, usage, n_chunks = "", None, None, 0
    async for chunk in stream:
        n_chunks += 1
        if chunk.choices:
            assert chunk.usage is None
            text += chunk.choices[0].delta.content or ""
            finish = chunk.choices[0].finish_reason or finish
        else:
            usage = chunk.usage
    assert n_chunks > 5
    assert text.startswith("Sim answer to: stream task 3") and finish == "stop"
    assert usage is not None and usage.completion_tokens == estimate_tokens(text)
    # A second sighting of the same body draws afresh; after a reset, the same body
    # without streaming draws what the stream drew (stream is not part of the key).
    plain = await client.chat.completions.create(model="m", messages=messages)
    assert plain.choices[0].message.content.startswith("Sim answer to: stream task 3")
    sim.reset()
    again = await client.chat.completions.create(model="m", messages=messages)
    assert again.choices[0].message.content == text
    await client.close()


def test_rpm_limit_429_then_admits(make_sim):
    sim = make_sim(rpm=120)  # bucket of 2 requests, one back every 0.5 s
    ok = [post(sim, body(f"r{i}")) for i in range(2)]
    assert [r.status_code for r in ok] == [200, 200]
    assert ok[0].headers["x-ratelimit-limit-requests"] == "120"
    assert ok[0].headers["x-ratelimit-remaining-requests"] == "1"
    assert ok[1].headers["x-ratelimit-remaining-requests"] == "0"
    r = post(sim, body("r2"))
    assert r.status_code == 429
    err = r.json()["error"]
    assert err["code"] == "rate_limit_exceeded" and err["type"] == "requests"
    assert "requests per min (RPM): Limit 120" in err["message"]
    assert r.headers["retry-after"] == "1"
    wait_ms = int(r.headers["retry-after-ms"])
    assert 1 <= wait_ms <= 500
    assert r.headers["x-ratelimit-remaining-requests"] == "0"
    assert r.headers["x-ratelimit-reset-requests"].endswith("s")
    time.sleep(wait_ms / 1000 + 0.02)
    assert post(sim, body("r2")).status_code == 200
    stats = sim.stats()
    assert stats["rate_limited"] == 1 and stats["successes"] == 3


async def test_rpm_429_seen_by_sdk(make_sim):
    sim = make_sim(rpm=60)
    client = sdk(sim)
    await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "a"}])
    with pytest.raises(openai.RateLimitError) as ei:
        await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "b"}])
    e = ei.value
    assert e.status_code == 429 and e.code == "rate_limit_exceeded"
    assert int(e.response.headers["retry-after"]) >= 1
    assert "x-ratelimit-reset-requests" in e.response.headers
    await client.close()


def test_tpm_limit_429_then_admits(make_sim):
    sim = make_sim(tpm=6000)  # 100 tokens/s, bucket of 100 tokens
    p = body("t0", max_tokens=40)  # costs 8 prompt + 40 = 48 tokens
    assert post(sim, p).status_code == 200
    r = post(sim, body("t1", max_tokens=40))
    assert r.status_code == 200
    assert r.headers["x-ratelimit-limit-tokens"] == "6000"
    assert int(r.headers["x-ratelimit-remaining-tokens"]) < 48
    r = post(sim, body("t2", max_tokens=40))
    assert r.status_code == 429
    assert r.json()["error"]["type"] == "tokens"
    assert r.json()["error"]["code"] == "rate_limit_exceeded"
    assert "x-ratelimit-reset-tokens" in r.headers and "x-ratelimit-limit-requests" not in r.headers
    wait_ms = int(r.headers["retry-after-ms"])
    assert 1 <= wait_ms <= 480
    time.sleep(wait_ms / 1000 + 0.02)
    assert post(sim, body("t2", max_tokens=40)).status_code == 200
    # A request larger than the whole per-minute limit: 429 that waiting cannot cure.
    r = post(sim, body("huge", max_tokens=7000))
    assert r.status_code == 429 and "retry-after" not in r.headers
    assert r.json()["error"]["message"].startswith("Request too large")


async def test_context_length_400(make_sim):
    sim = make_sim(context_window=1000)
    client = sdk(sim)
    with pytest.raises(openai.BadRequestError) as ei:
        await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x" * 400}], max_tokens=950
        )
    e = ei.value
    assert e.code == "context_length_exceeded" and e.type == "invalid_request_error"
    assert "maximum context length is 1000 tokens" in e.message
    assert "(107 in the messages, 950 in the completion)" in e.message
    ok = await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "x" * 400}], max_tokens=100
    )
    assert ok.usage.prompt_tokens == 107
    await client.close()


async def test_require_key_401(make_sim):
    sim = make_sim(require_key="sk-right")
    for key in ("sk-wrong",):
        client = sdk(sim, api_key=key)
        with pytest.raises(openai.AuthenticationError) as ei:
            await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        assert ei.value.code == "invalid_api_key" and "sk-wrong" not in ei.value.message
        await client.close()
    r = post(sim, body("hi"))  # no Authorization header at all
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    client = sdk(sim, api_key="sk-right")
    ok = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert ok.choices[0].message.content.startswith("Sim answer to: hi")
    await client.close()
    assert "sk-right" not in json.dumps(sim.stats())


def test_scripted_faults(make_sim):
    sim = make_sim()
    p = body("flaky task [[sim:500x2]]")
    codes = [post(sim, p).status_code for _ in range(4)]
    assert codes == [500, 500, 200, 200]
    r = post(sim, body("throttled [[sim:429x1]]"))
    assert r.status_code == 429 and r.headers["retry-after-ms"] == "100"
    assert post(sim, body("throttled [[sim:429x1]]")).status_code == 200
    r = post(sim, body("broke [[sim:quota]]"))
    assert r.status_code == 429 and "retry-after" not in r.headers
    assert r.json()["error"]["code"] == "insufficient_quota"
    assert post(sim, body("broke [[sim:quota]]")).status_code == 429  # always
    for status, code in (
        (400, "context_length_exceeded"),
        (401, "invalid_api_key"),
        (404, "model_not_found"),
        (503, None),
    ):
        r = post(sim, body(f"always [[sim:{status}]]"))
        assert r.status_code == status and r.json()["error"]["code"] == code
    assert r.json()["error"]["type"] == "server_error"
    stats = sim.stats()
    assert stats["by_status"]["500"] == 2 and stats["server_errors"] == 3
    assert stats["successes_by_prompt"]["flaky task [[sim:500x2]]"] == 2
    assert stats["duplicate_successes"] == 1  # the flaky body succeeded a second time


def test_cached_tokens_for_repeated_prefix(make_sim):
    sim = make_sim()
    shared = {"role": "system", "content": "Shared context. " * 80}  # ~324 tokens
    first = post(sim, {"model": "m", "messages": [shared, {"role": "user", "content": "A"}]})
    second = post(sim, {"model": "m", "messages": [shared, {"role": "user", "content": "B"}]})
    c1 = first.json()["usage"]["prompt_tokens_details"]["cached_tokens"]
    c2 = second.json()["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert c1 == 0
    assert c2 > 0 and c2 % 64 == 0 and c2 <= second.json()["usage"]["prompt_tokens"]
    assert sim.stats()["tokens"]["cached"] == c2


async def _outcomes(sim: SimServer, payloads: list[dict]) -> dict[str, tuple]:
    out: dict[str, list] = {}
    async with httpx.AsyncClient(trust_env=False, timeout=5) as c:

        async def one(p):
            r = await c.post(sim.base_url + "/chat/completions", json=p)
            text = r.json()["choices"][0]["message"]["content"] if r.status_code == 200 else ""
            out.setdefault(p["messages"][0]["content"], []).append((r.status_code, text))

        await asyncio.gather(*(one(p) for p in payloads))
    return {k: tuple(sorted(v)) for k, v in out.items()}


async def test_determinism_independent_of_order(make_sim):
    payloads = [body(f"agent {i} task") for i in range(40)] * 2  # each body sent twice
    shuffled = payloads[:]
    random.Random(5).shuffle(shuffled)
    a = make_sim(seed=7, error_rate=0.3, latency_ms=2.0)
    b = make_sim(seed=7, error_rate=0.3, latency_ms=2.0)
    c = make_sim(seed=8, error_rate=0.3, latency_ms=2.0)
    out_a = await _outcomes(a, payloads)
    out_b = await _outcomes(b, shuffled[::-1])
    out_c = await _outcomes(c, payloads)
    assert out_a == out_b
    assert out_a != out_c  # the seed matters (the test can fail)
    statuses = [s for v in out_a.values() for s, _ in v]
    assert 10 <= statuses.count(500) + statuses.count(502) + statuses.count(503) <= 40
    assert a.stats()["by_status"] == b.stats()["by_status"]


async def test_hang_times_out_and_stop_is_quick(make_sim):
    sim = make_sim(hang_rate=1.0, hang_s=600)
    client = sdk(sim, timeout=0.3)
    t0 = time.monotonic()
    with pytest.raises(openai.APITimeoutError):
        await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "h"}])
    assert time.monotonic() - t0 < 2
    await client.close()
    # A hang still in flight must not hold stop() up.
    pending = asyncio.create_task(asyncio.to_thread(post, sim, body("h2"), None, 30.0))
    await wait_until(lambda: sim.stats()["in_flight"] >= 1, "the second hang in flight")
    assert sim.stats()["hangs"] == 2
    t0 = time.monotonic()
    await asyncio.to_thread(sim.stop)
    assert time.monotonic() - t0 < 2
    try:
        await asyncio.wait_for(pending, 5)
    except (TimeoutError, httpx.HTTPError):
        pass


def test_scripted_hang_once(make_sim):
    sim = make_sim()
    p = body("slow start [[sim:hangx1]]")
    with pytest.raises(httpx.ReadTimeout):
        post(sim, p, timeout=0.2)
    assert post(sim, p).status_code == 200


def test_stream_stall(make_sim):
    sim = make_sim(stream_stall_rate=1.0, hang_s=600)
    seen = []
    with httpx.Client(trust_env=False, timeout=httpx.Timeout(5.0, read=0.3)) as c:
        with pytest.raises(httpx.ReadTimeout):
            with c.stream("POST", sim.base_url + "/chat/completions", json=body("stall me", stream=True)) as r:
                assert r.status_code == 200
                for line in r.iter_lines():
                    if line:
                        seen.append(line)
    assert seen and all(line.startswith("data: {") for line in seen)
    assert sim.stats()["stream_stalls"] == 1


def test_runtime_config_down_stats_and_reset(make_sim):
    sim = make_sim()
    assert post(sim, body("one")).status_code == 200
    sim.update_config(down=True)
    r = post(sim, body("two"))
    assert r.status_code == 503 and r.json()["error"]["type"] == "server_error"
    sim.update_config(down=False, rpm=600)
    assert post(sim, body("two")).headers["x-ratelimit-limit-requests"] == "600"
    with pytest.raises(ValueError, match="unknown"):
        sim.update_config(nope=1)
    s = sim.stats()
    assert s["requests"] == 3 and s["successes"] == 2 and s["server_errors"] == 1
    assert s["by_status"] == {"200": 2, "503": 1}
    assert s["successes_by_prompt"] == {"one": 1, "two": 1}
    assert s["config"]["rpm"] == 600
    with httpx.Client(trust_env=False) as c:
        assert c.get(sim.url + "/health").json()["status"] == "ok"
        assert c.get(sim.url + "/v1/nope").status_code == 404
        bad = c.post(sim.base_url + "/chat/completions", content=b"{not json")
        assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"
    sim.reset()
    s = sim.stats()
    assert s["requests"] == 0 and s["successes_by_prompt"] == {}


def test_process_mode():
    cfg = SimConfig(latency_ms=0, seed=3, require_key="sk-proc", rpm=6000)
    with SimServer(cfg).start(mode="process") as sim:
        assert sim.base_url.startswith("http://127.0.0.1:") and sim.port > 0
        r = post(sim, body("from a process"), headers={"Authorization": "Bearer sk-proc"})
        assert r.status_code == 200
        assert r.json()["choices"][0]["message"]["content"].startswith("Sim answer to: from a")
        assert r.headers["x-ratelimit-limit-requests"] == "6000"
        assert post(sim, body("no key")).status_code == 401
        s = sim.stats()
        assert s["successes"] == 1 and s["config"]["seed"] == 3
        proc = sim._proc
    assert proc is not None and proc.poll() is not None


# -- the liveness modes: slow bodies, a quota window, limits told only on 429s, a slow stream ------


def test_a_share_of_bodies_is_slow_every_time_they_are_sent(make_sim):
    """`slow_rate`: about that share of bodies take `slow_factor` x their latency, and a body drawn
    slow is as slow when sent again (a long prompt, a cold replica: a copy is no faster)."""
    sim = make_sim(latency_ms=2.0, latency_sigma=0.0, slow_rate=0.1, slow_factor=400.0)

    def took(prompt: str) -> float:
        t0 = time.monotonic()
        assert post(sim, body(prompt)).status_code == 200
        return time.monotonic() - t0

    times = {f"b{i}": took(f"b{i}") for i in range(40)}
    slow = {p for p, s in times.items() if s >= 0.75}  # 0.8 s each, the others 2 ms (busy: still far below)
    assert 1 <= len(slow) <= 12 and not [s for s in times.values() if 0.4 < s < 0.75], times
    again = next(iter(slow))
    assert took(again) >= 0.75, "a slow body sent again was fast"


def test_the_quota_window_opens_and_closes_on_the_clock(make_sim):
    sim = make_sim(quota_at_s=0.3, quota_for_s=0.4)
    assert post(sim, body("before")).status_code == 200
    time.sleep(0.35)
    spent = post(sim, body("inside"))
    assert spent.status_code == 429
    assert spent.json()["error"]["code"] == "insufficient_quota" and "retry-after" not in spent.headers
    time.sleep(0.45)
    assert post(sim, body("inside")).status_code == 200, "the window closed: answered again"
    stats = sim.stats()
    assert stats["quota_errors"] == 1 and stats["successes"] == 2
    sim.update_config(quota_at_s=0.0, quota_for_s=60.0)  # a patch starts the window's clock anew
    assert post(sim, body("patched")).status_code == 429


def test_rate_limit_headers_only_on_429s(make_sim):
    sim = make_sim(rpm=120, rate_headers_on_success=False)  # a bucket of 2
    ok = [post(sim, body(f"h{i}")) for i in range(2)]
    assert [r.status_code for r in ok] == [200, 200]
    assert not any(k.startswith("x-ratelimit-") for r in ok for k in r.headers), "told on a success"
    limited = post(sim, body("h2"))
    assert limited.status_code == 429 and limited.headers["x-ratelimit-limit-requests"] == "120"


def test_liveness_flags_round_trip():
    cfg = SimConfig(slow_rate=0.01, slow_factor=50.0, quota_at_s=5.0, quota_for_s=3.0, rate_headers_on_success=False)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert config_from_args(parser.parse_args(config_to_argv(cfg))) == cfg
    with pytest.raises(ValueError, match="slow_factor"):
        SimConfig(slow_factor=0.0)


def test_a_slow_steady_stream_spaces_its_chunks(make_sim):
    """`tokens_per_s`: a streamed answer's tokens come at that rate, one chunk at a time."""
    sim = make_sim(tokens_per_s=20.0, output_tokens=(8, 8))
    arrivals = []
    with httpx.Client(trust_env=False, timeout=5.0) as c:
        with c.stream("POST", sim.base_url + "/chat/completions", json=body("steady", stream=True)) as r:
            for line in r.iter_lines():
                if line.startswith("data: {"):
                    arrivals.append(time.monotonic())
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:], strict=False)]
    assert len(arrivals) >= 6 and sum(gaps) >= 0.25, gaps  # 8 tokens at 20/s: 0.4 s of writing
