"""swarm-tui's engine against the source article's orchestrator, same simulator, same run.

Scenarios (the simulator runs in its own process so it does not share the GIL):

  overhead   N tasks on a zero-latency simulator, 50 in flight: makespan and tasks/s of swarm-tui
             (default: the aiohttp hot path; and --backend httpx) against a bare SDK loop
             (gather + semaphore, nothing else; default and aiohttp transports) and a plain
             aiohttp loop (post JSON, read JSON: the wire's limit here).
  ratelimit  1,000 tasks, simulator at 3,000 RPM and 200 ms, the limit NOT told to swarm-tui:
             makespan / ideal (N / rate) and the share of requests answered 429.
  failover   the primary goes down mid-run: time to the fallback's first answer, tasks lost.
  stream     what streaming costs at zero latency: swarm-tui plain (the aiohttp hot path) and
             --stream (the SDK's streaming path, with its first-token and silence watch), and a
             bare SDK loop streaming, 50 in flight: whether live calls should stream by default.
  faults     the same with 2% 5xx and 1% hangs: tasks lost and p95 task latency, with and
             without hedging. Every contender has the article's 15 s per-call timeout.

The article's orchestrator (article_orchestrator.py) runs as the article writes it: the SDK's
default retries, 30 in flight, then its failed agents re-run at 10 in flight; swarm-tui and the
bare loops run 50 in flight.

Usage:  python benchmarks/bench_engine.py [--scenarios overhead,ratelimit,faults,failover,stream] [--quick]
Figures are ratios against the baseline measured in the same run; absolute numbers depend on
the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from swarm_tui.core.task import Task
from swarm_tui.engine import EngineSettings  # noqa: E402
from swarm_tui.jobs import Job
from swarm_tui.providers.profile import ProviderProfile  # noqa: E402
from swarm_tui.run.session import RunPlan, SwarmSession  # noqa: E402
from swarm_tui.sim import SimConfig, SimServer  # noqa: E402

from article_orchestrator import run_article  # noqa: E402


def bodies(n: int, tag: str) -> list[dict]:
    return [
        {
            "model": "sim-1",
            "max_tokens": 64,
            "messages": [
                {"role": "system", "content": f"You are sub-agent #{i} of swarm/{n}."},
                {"role": "user", "content": f"{tag} タスク#{i}を実行"},
            ],
        }
        for i in range(n)
    ]


async def run_swarm(
    base_url: str,
    work: list[dict],
    *,
    backend: str | None = None,
    fallback_base_url: str | None = None,
    on_event=None,
    **settings,
) -> dict:
    """swarm-tui headless; `backend` None: the default (aiohttp)."""
    tasks = [Task(i, f"t{i}", body) for i, body in enumerate(work)]
    profile = ProviderProfile("bench", base_url=base_url, fallback_base_url=fallback_base_url)
    if backend is not None:
        profile = ProviderProfile("bench", base_url=base_url, backend=backend, fallback_base_url=fallback_base_url)
    with tempfile.TemporaryDirectory() as tmp:
        session = SwarmSession.open_new(
            Job("bench", "bench", tasks), RunPlan(profile, EngineSettings.of(**settings)), Path(tmp) / "run"
        )
        if on_event is not None:
            session.engine.subscribe(on_event)
        t0 = time.monotonic()
        try:
            finished = await session.run()
        finally:
            await session.aclose()
        makespan = time.monotonic() - t0
        stats = session.engine.stats
    return {
        "ok": finished.succeeded,
        "failed": finished.failed,
        "makespan_s": makespan,
        "p95_s": (stats.percentile(0.95) or 0) / 1000,
    }


async def run_bare_sdk(
    base_url: str, work: list[dict], concurrency: int = 50, aiohttp: bool = False, stream: bool = False
) -> dict:
    from openai import AsyncOpenAI, DefaultAioHttpClient

    client = AsyncOpenAI(
        base_url=base_url,
        api_key="sk-no-key-required",
        max_retries=0,
        http_client=DefaultAioHttpClient() if aiohttp else None,
    )
    sem = asyncio.Semaphore(concurrency)

    async def one(body: dict) -> None:
        async with sem:
            if not stream:
                await client.chat.completions.create(**body)
                return
            chunks = await client.chat.completions.create(**body, stream=True, stream_options={"include_usage": True})
            async for _ in chunks:
                pass

    t0 = time.monotonic()
    await asyncio.gather(*[one(b) for b in work])
    makespan = time.monotonic() - t0
    await client.close()
    return {"ok": len(work), "failed": 0, "makespan_s": makespan}


async def run_plain_aiohttp(base_url: str, work: list[dict], concurrency: int = 50) -> dict:
    """POST the JSON, read the JSON, nothing else: the wire's limit on this machine."""
    import json

    import aiohttp

    sem = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession() as session:

        async def one(body: dict) -> None:
            async with (
                sem,
                session.post(
                    f"{base_url}/chat/completions", data=json.dumps(body), headers={"Content-Type": "application/json"}
                ) as response,
            ):
                json.loads(await response.read())

        t0 = time.monotonic()
        await asyncio.gather(*[one(b) for b in work])
        makespan = time.monotonic() - t0
    return {"ok": len(work), "failed": 0, "makespan_s": makespan}


def row(name: str, result: dict, sim_stats: dict, n: int, ideal: float | None = None) -> str:
    requests = sim_stats["requests"] or 1
    share429 = sim_stats["rate_limited"] / requests
    ratio = f"{result['makespan_s'] / ideal:5.2f}x" if ideal else "   - "
    p95 = f"{result['p95_s']:6.2f}s" if "p95_s" in result else "    - "
    return (
        f"  {name:<28} ok {result['ok']:>5}/{n:<5} lost {n - result['ok']:>4}  makespan {result['makespan_s']:7.2f}s"
        f"  {n / result['makespan_s']:8.1f} tasks/s  ideal {ratio}  429s {share429:6.1%}"
        f"  requests {sim_stats['requests']:>6}  p95 task {p95}" + (f"  ({result['note']})" if "note" in result else "")
    )


def article_as_dict(r) -> dict:
    lat = r.task_latencies_s
    return {
        "ok": r.ok,
        "failed": r.failed,
        "makespan_s": r.makespan_s,
        "p95_s": lat[int(0.95 * (len(lat) - 1))] if lat else 0.0,
        "note": f"re-ran {r.rerun} failed agents at 10 in flight",
    }


async def scenario(name: str, cfg: SimConfig, n: int, ideal: float | None, contenders: list[str]) -> None:
    print(
        f"\n{name}: {n} tasks; simulator latency {cfg.latency_ms:g} ms, rpm {cfg.rpm}, "
        f"5xx {cfg.error_rate:.0%}, hangs {cfg.hang_rate:.0%}" + (f"; ideal {ideal:.1f}s" if ideal else "")
    )
    with SimServer(cfg).start(mode="process") as sim:
        for contender in contenders:
            sim.reset()
            work = bodies(n, f"{contender}-{name}")
            if contender == "bare SDK loop":
                result = await run_bare_sdk(sim.base_url, work)
            elif contender == "bare SDK loop (aiohttp)":
                result = await run_bare_sdk(sim.base_url, work, aiohttp=True)
            elif contender == "plain aiohttp loop":
                result = await run_plain_aiohttp(sim.base_url, work)
            elif contender == "article orchestrator":
                result = article_as_dict(await run_article(sim.base_url, work))
            elif contender == "swarm-tui":
                result = await run_swarm(sim.base_url, work, concurrency=50, timeout_s=15.0)
            elif contender == "swarm-tui --hedge":
                result = await run_swarm(sim.base_url, work, concurrency=50, timeout_s=15.0, hedge=True)
            elif contender == "swarm-tui --backend httpx":
                result = await run_swarm(sim.base_url, work, backend="httpx", concurrency=50, timeout_s=15.0)
            elif contender == "swarm-tui --stream":
                result = await run_swarm(sim.base_url, work, concurrency=50, timeout_s=15.0, stream=True)
            elif contender == "bare SDK loop (stream)":
                result = await run_bare_sdk(sim.base_url, work, stream=True)
            else:
                raise ValueError(contender)
            print(row(contender, result, sim.stats(), n, ideal), flush=True)
            await asyncio.sleep(1.5 if cfg.rpm else 0.1)


async def failover_scenario(n: int, down_after_s: float = 0.5) -> None:
    """The primary goes down mid-run (0.5 s in: swarm-tui runs the 1,000 tasks in about 1.3 s): seconds
    from the outage to the first answer from the fallback,
    and tasks lost. The article's answer to an outage is a manual DNS switch (45 s measured)."""
    from swarm_tui.core.events import EndpointSwitched, TaskSucceeded

    cfg = SimConfig(latency_ms=50.0, latency_sigma=0.3, seed=4)
    print(
        f"\nfailover: {n} tasks; simulator latency 50 ms; the primary answers 503 to everything "
        f"from {down_after_s:g}s on"
    )
    with SimServer(cfg).start(mode="process") as primary, SimServer(cfg).start(mode="process") as secondary:
        for contender in ["article orchestrator", "swarm-tui --fallback-base-url"]:
            primary.update_config(down=False)
            primary.reset()
            secondary.reset()
            marks: dict[str, float] = {}

            async def outage(marks: dict[str, float] = marks) -> None:
                await asyncio.sleep(down_after_s)
                await asyncio.to_thread(primary.update_config, down=True)
                marks["down"] = time.monotonic()

            def watch(event, marks: dict[str, float] = marks) -> None:
                if isinstance(event, EndpointSwitched) and "switch" not in marks:
                    marks["switch"] = time.monotonic()
                if (
                    isinstance(event, TaskSucceeded)
                    and event.attempt.endpoint.endswith("/fallback")
                    and "first_fallback_answer" not in marks
                ):
                    marks["first_fallback_answer"] = time.monotonic()

            timer = asyncio.create_task(outage())
            work = bodies(n, f"{contender}-failover")
            if contender == "article orchestrator":
                result = article_as_dict(await run_article(primary.base_url, work))
            else:
                result = await run_swarm(
                    primary.base_url,
                    work,
                    fallback_base_url=secondary.base_url,
                    on_event=watch,
                    concurrency=50,
                    timeout_s=15.0,
                )
            await timer
            to_switch = (
                f"{marks['first_fallback_answer'] - marks['down']:.2f}s"
                if "first_fallback_answer" in marks
                else "never"
            )
            print(
                f"  {contender:<30} ok {result['ok']:>5}/{n:<5} lost {n - result['ok']:>4}  makespan "
                f"{result['makespan_s']:6.2f}s  outage -> first fallback answer: {to_switch}",
                flush=True,
            )


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False
    )
    parser.add_argument("--scenarios", default="overhead,ratelimit,faults,failover")
    parser.add_argument("--quick", action="store_true", help="smaller N (a smoke run)")
    args = parser.parse_args()
    chosen = args.scenarios.split(",")
    scale = 0.3 if args.quick else 1.0
    if "overhead" in chosen:
        n = int(3000 * scale)
        await scenario(
            "overhead",
            SimConfig(latency_ms=0.0, latency_sigma=0.0, seed=1),
            n,
            None,
            [
                "bare SDK loop",
                "bare SDK loop (aiohttp)",
                "plain aiohttp loop",
                "article orchestrator",
                "swarm-tui",
                "swarm-tui --backend httpx",
            ],
        )
    if "ratelimit" in chosen:
        n = int(1000 * scale)
        await scenario(
            "ratelimit",
            SimConfig(latency_ms=200.0, latency_sigma=0.3, rpm=3000, seed=2),
            n,
            n / 50.0,
            ["article orchestrator", "swarm-tui"],
        )
    if "faults" in chosen:
        n = int(1000 * scale)
        await scenario(
            "faults",
            SimConfig(
                latency_ms=200.0, latency_sigma=0.3, rpm=3000, error_rate=0.02, hang_rate=0.01, hang_s=60.0, seed=3
            ),
            n,
            n / 50.0,
            ["article orchestrator", "swarm-tui", "swarm-tui --hedge"],
        )

    if "failover" in chosen:
        await failover_scenario(int(1000 * scale))
    if "stream" in chosen:
        n = int(3000 * scale)
        await scenario(
            "stream",
            SimConfig(latency_ms=0.0, latency_sigma=0.0, seed=1),
            n,
            None,
            ["swarm-tui", "swarm-tui --stream", "bare SDK loop", "bare SDK loop (stream)"],
        )


if __name__ == "__main__":
    asyncio.run(main())
