"""The engine's decisions, measured side by side in one run: the adaptive limit and the tail.

Scenarios (the simulator runs in its own process so it does not share the GIL):

  adaptive   the 100-agent demo (sample_jobs/swarm-100.toml on the demo simulator: 700 ms,
             2% 5xx) and 1,000 tasks on a zero-latency simulator, each with the adaptive limit
             and with the ceiling fixed (--no-adaptive). Goal: adaptive <= 1.10x fixed, the
             ceiling reached within 2 round trips.
  ratelimit  1,000 tasks at 3,000 RPM (200 ms), the limit not told: makespan / ideal, 429 share.
  tail       1,000 tasks, 3,000 RPM not told, 200 ms, 1% 5xx, 1% of calls hang for good; swarm-tui
             with no flags and with --hedge, against the article's orchestrator (15 s timeout).
             Goal: no flags <= 1.05x ideal in each run, < 2% 429s, every task once.
  slow       every answer genuinely slow (20 s, timeout 60 s): nothing may be retried early.
  mixed      300 tasks on a simulator that writes 300 tokens/s after a 20 ms first token: 6 long
             answers (1,500 tokens, ~5 s) among 294 short ones (16 tokens), a fallback configured
             (the same model: also 300 tokens/s); bodies with their own max_tokens, one generous
             max_tokens (2,000) for all, and none. Goal: 300/300, at most 303 requests, no failover.

  slowone    500 tasks, 20 ms answers, but 1 body in 100 is answered 200 x slower (4 s) every time it
             is sent, the same max_tokens as the others, --timeout 60: goal 0 failed, <= 2% more
             requests than tasks (a backup each; a guess never fails an answer).
  start      a provider that states its limits only on its 429s (600 RPM, 200 ms): 200 tasks to one
             endpoint, and to a route of three such endpoints (balance): goal < 2% of requests
             answered 429, makespan <= 1.05x the ideal (the gentle start).
  quota      1,000 tasks (50 ms, 20 in flight); the quota runs out for 10 s once 300 are done: goal
             every task done once, nothing failed, the suspension and its end journaled.

Usage:  python benchmarks/bench_decisions.py
          [--scenarios adaptive,ratelimit,tail,slow,mixed,slowone,start,quota] [--repeat N]
Ratios are against the baseline or the ideal measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from swarm_tui.core.events import ConcurrencyChanged, EndpointSwitched, RunStarted
from swarm_tui.core.task import Task
from swarm_tui.engine import EngineSettings  # noqa: E402
from swarm_tui.jobs import Job, load_job
from swarm_tui.providers.profile import ProviderProfile  # noqa: E402
from swarm_tui.run.session import DEMO_SIM, RunPlan, SwarmSession  # noqa: E402
from swarm_tui.sim import SimConfig, SimServer  # noqa: E402
from swarm_tui.util.locations import demo_job  # noqa: E402

from article_orchestrator import run_article  # noqa: E402
from bench_engine import article_as_dict, bodies  # noqa: E402


async def run_engine(base_url: str, tasks: list[Task], **settings) -> dict:
    """One swarm-tui run, in process; what it did and how its limit moved."""
    profile = ProviderProfile("bench", base_url=base_url)
    marks: dict[str, float] = {}
    limits: list[int] = []

    def watch(event) -> None:
        if isinstance(event, RunStarted):
            marks["start"] = time.monotonic()
            limits.append(event.concurrency)
        elif isinstance(event, ConcurrencyChanged):
            limits.append(event.limit)
            if event.limit >= settings.get("concurrency", 50) and "ceiling" not in marks:
                marks["ceiling"] = time.monotonic()

    with tempfile.TemporaryDirectory() as tmp:
        session = SwarmSession.open_new(
            Job("bench", "bench", tasks), RunPlan(profile, EngineSettings.of(**settings)), Path(tmp) / "run"
        )
        session.engine.subscribe(watch)
        t0 = time.monotonic()
        try:
            finished = await session.run()
        finally:
            await session.aclose()
        engine = session.engine
    return {
        "ok": finished.succeeded,
        "makespan_s": time.monotonic() - t0,
        "sent": engine.stats.sent,
        "min_limit": min(limits) if limits else None,
        "to_ceiling_s": marks.get("ceiling", float("nan")) - t0,
        "abandoned": engine.tail.abandoned,
        "p50_s": (engine.stats.percentile(0.5) or 0) / 1000,
    }


def share_429(stats: dict) -> float:
    return stats["rate_limited"] / max(1, stats["requests"])


async def adaptive(repeat: int) -> None:
    demo = load_job(demo_job())
    zero = [Task(i, f"t{i}", b) for i, b in enumerate(bodies(1000, "zero"))]
    for name, cfg, tasks in (
        ("demo (swarm-100.toml, demo simulator)", DEMO_SIM, demo.tasks),
        ("1,000 tasks, zero latency", SimConfig(latency_ms=0.0, latency_sigma=0.0, seed=1), zero),
    ):
        print(f"\nadaptive: {name}")
        ratios = []
        with SimServer(cfg).start(mode="process") as sim:
            for i in range(repeat):
                row = {}
                for label, flags in (("fixed", {"adaptive": False}), ("adaptive", {})):
                    sim.reset()
                    row[label] = await run_engine(sim.base_url, tasks, concurrency=50, **flags)
                a, f = row["adaptive"], row["fixed"]
                ratio = a["makespan_s"] / f["makespan_s"]
                ratios.append(ratio)
                rtts = a["to_ceiling_s"] / a["p50_s"] if a["p50_s"] else float("nan")
                print(
                    f"  run {i + 1}: fixed {f['makespan_s']:6.2f}s  adaptive {a['makespan_s']:6.2f}s  "
                    f"ratio {ratio:5.2f}x  lowest limit {a['min_limit']}  ceiling after {a['to_ceiling_s']:.2f}s "
                    f"(~{rtts:.1f} round trips of p50 {a['p50_s'] * 1000:.0f} ms)",
                    flush=True,
                )
        print(f"  median ratio {statistics.median(ratios):.2f}x (goal <= 1.10x)")


async def ratelimit(repeat: int, headers: bool) -> None:
    n = 1000
    cfg = SimConfig(latency_ms=200.0, latency_sigma=0.3, rpm=3000, seed=2, rate_headers=headers)
    ideal = n / 50.0
    print(f"\nratelimit: {n} tasks, 3,000 RPM not told, 200 ms, {_headers(headers)}; ideal {ideal:.0f}s")
    with SimServer(cfg).start(mode="process") as sim:
        for i in range(repeat):
            sim.reset()
            r = await run_engine(sim.base_url, [Task(j, f"t{j}", b) for j, b in enumerate(bodies(n, f"rl{i}"))])
            stats = sim.stats()
            print(
                f"  run {i + 1}: {r['makespan_s']:6.2f}s = {r['makespan_s'] / ideal:4.2f}x ideal  "
                f"429s {share_429(stats):5.1%}  ok {r['ok']}/{n}",
                flush=True,
            )
            await asyncio.sleep(2.0)


def _headers(headers: bool) -> str:
    return "x-ratelimit-* headers sent" if headers else "no x-ratelimit-* headers (a server the project never saw)"


async def tail(repeat: int, headers: bool, article: bool = True) -> None:
    n = 1000
    cfg = SimConfig(
        latency_ms=200.0,
        latency_sigma=0.3,
        rpm=3000,
        error_rate=0.01,
        hang_rate=0.01,
        hang_s=3600.0,
        seed=3,
        rate_headers=headers,
    )
    ideal = n / 50.0
    print(
        f"\ntail: {n} tasks, 3,000 RPM not told, 200 ms, 1% 5xx, 1% hang for good, {_headers(headers)}; "
        f"ideal {ideal:.0f}s"
    )
    worst = {}
    with SimServer(cfg).start(mode="process") as sim:
        for i in range(repeat):
            labels = ("article orchestrator",) * article + ("swarm-tui (no flags)", "swarm-tui --hedge")
            for label in labels:
                sim.reset()
                work = bodies(n, f"{label}-{i}")
                if label == "article orchestrator":
                    r = article_as_dict(await run_article(sim.base_url, work))
                    extra = f"  {r['note']}"
                else:
                    r = await run_engine(
                        sim.base_url, [Task(j, f"t{j}", b) for j, b in enumerate(work)], hedge=label.endswith("--hedge")
                    )
                    extra = f"  abandoned {r['abandoned']}"
                stats = sim.stats()
                ratio = r["makespan_s"] / ideal
                worst[label] = max(worst.get(label, 0.0), ratio)
                print(
                    f"  run {i + 1} {label:<22} {r['makespan_s']:6.2f}s = {ratio:4.2f}x ideal  "
                    f"429s {share_429(stats):5.1%}  ok {r['ok']}/{n}  duplicate answers "
                    f"{stats['duplicate_successes']}{extra}",
                    flush=True,
                )
                await asyncio.sleep(2.0)
    print(
        "  worst of the runs: "
        + ", ".join(f"{k} {v:.2f}x" for k, v in worst.items())
        + " (goal: no flags <= 1.05x in each run)"
    )


async def slow() -> None:
    n = 100
    cfg = SimConfig(latency_ms=20_000.0, latency_sigma=0.3, seed=5)
    print(f"\nslow: {n} tasks, every answer ~20 s (sigma 0.3), timeout 60 s, 50 in flight")
    with SimServer(cfg).start(mode="process") as sim:
        r = await run_engine(
            sim.base_url, [Task(j, f"t{j}", b) for j, b in enumerate(bodies(n, "slow"))], adaptive=False
        )
        stats = sim.stats()
    print(
        f"  {r['makespan_s']:6.1f}s  ok {r['ok']}/{n}  requests {stats['requests']}  abandoned early "
        f"{r['abandoned']} (goal 0)"
    )


def mixed_bodies(max_tokens) -> list[dict]:
    """300 bodies, 6 of them asking for a 1,500-token answer; `max_tokens`: a callable of `long`,
    one number for all, or None (no max_tokens)."""
    out = []
    for i in range(300):
        long = i % 50 == 25
        body = {
            "model": "sim-1",
            "messages": [{"role": "user", "content": f"mixed {i}" + (" [[sim:tokens=1500]]" if long else "")}],
        }
        ceiling = max_tokens(long) if callable(max_tokens) else max_tokens
        if ceiling is not None:
            body["max_tokens"] = ceiling
        out.append(body)
    return out


async def mixed(repeat: int) -> None:
    print(
        "\nmixed: 300 tasks, 6 long (1,500 tokens at 300 tokens/s: ~5 s) among 294 of 16 tokens, a fallback; "
        "goal 300/300, <= 303 requests, no failover"
    )
    primary_cfg = SimConfig(latency_ms=20.0, latency_sigma=0.2, tokens_per_s=300.0, output_tokens=(16, 16), seed=11)
    variants = {
        "own max_tokens (16 / 1,600)": lambda long: 1600 if long else 16,
        "max_tokens 2,000 for all": 2000,
        "no max_tokens": None,
    }
    with (
        SimServer(primary_cfg).start(mode="process") as primary,
        SimServer(replace(primary_cfg, seed=12)).start(mode="process") as fallback,
    ):
        for i in range(repeat):
            for label, ceiling in variants.items():
                primary.reset()
                fallback.reset()
                switches: list = []
                profile = ProviderProfile("bench", base_url=primary.base_url, fallback_base_url=fallback.base_url)
                tasks = [Task(j, f"m{j}", b) for j, b in enumerate(mixed_bodies(ceiling))]
                with tempfile.TemporaryDirectory() as tmp:
                    session = SwarmSession.open_new(
                        Job("mixed", "bench", tasks), RunPlan(profile, EngineSettings()), Path(tmp) / "run"
                    )
                    session.engine.subscribe(
                        lambda e, seen=switches: seen.append(e) if isinstance(e, EndpointSwitched) else None
                    )
                    t0 = time.monotonic()
                    try:
                        finished = await session.run()
                    finally:
                        await session.aclose()
                    abandoned = session.engine.tail.abandoned
                requests = primary.stats()["requests"] + fallback.stats()["requests"]
                print(
                    f"  run {i + 1} {label:<28} {finished.succeeded}/300 done  {requests} requests  "
                    f"{abandoned} abandoned  {len(switches)} failovers  {time.monotonic() - t0:5.2f}s",
                    flush=True,
                )


async def slowone(repeat: int) -> None:
    n = 500
    cfg = SimConfig(latency_ms=20.0, latency_sigma=0.2, slow_rate=0.01, slow_factor=200.0, seed=21)
    print(
        f"\nslowone: {n} tasks, 20 ms, 1 body in 100 answered 200 x slower every time it is sent, same max_tokens, "
        "--timeout 60; goal 0 failed, <= 2% more requests than tasks"
    )
    with SimServer(cfg).start(mode="process") as sim:
        for i in range(repeat):
            sim.reset()
            tasks = [Task(j, f"s{j}", b) for j, b in enumerate(bodies(n, f"slowone{i}"))]
            r = await run_engine(sim.base_url, tasks, timeout_s=60.0)
            stats = sim.stats()
            print(
                f"  run {i + 1}: {r['ok']}/{n} done, {n - r['ok']} not  requests {stats['requests']} "
                f"(+{stats['requests'] / n - 1:.1%})  backups that won {r['abandoned']}  {r['makespan_s']:5.2f}s",
                flush=True,
            )


async def start(repeat: int) -> None:
    n = 200
    cfg = SimConfig(latency_ms=200.0, latency_sigma=0.2, rpm=600, rate_headers_on_success=False, seed=22)
    print(f"\nstart: {n} tasks at 600 RPM, limits told only on 429s, 200 ms; goal < 2% 429s, <= 1.05x ideal")
    with SimServer(cfg).start(mode="process") as sim:
        ideal = n / 10.0
        for i in range(repeat):
            sim.reset()
            tasks = [Task(j, f"g{j}", b) for j, b in enumerate(bodies(n, f"start{i}"))]
            r = await run_engine(sim.base_url, tasks)
            stats = sim.stats()
            print(
                f"  run {i + 1} one endpoint:   {r['makespan_s']:6.2f}s = {r['makespan_s'] / ideal:4.2f}x ideal  "
                f"429s {share_429(stats):5.1%} of {stats['requests']}  ok {r['ok']}/{n}",
                flush=True,
            )
            await asyncio.sleep(1.5)
    sims = [SimServer(replace(cfg, seed=30 + k)).start(mode="process") for k in range(3)]
    try:
        ideal = 3 * n / 30.0
        for i in range(repeat):
            for sim in sims:
                sim.reset()
            r = await run_route([sim.base_url for sim in sims], 3 * n, f"route{i}")
            stats = [sim.stats() for sim in sims]
            requests = sum(s["requests"] for s in stats)
            limited = sum(s["rate_limited"] for s in stats)
            print(
                f"  run {i + 1} route of three: {r['makespan_s']:6.2f}s = {r['makespan_s'] / ideal:4.2f}x ideal  "
                f"429s {limited / max(1, requests):5.1%} of {requests}  ok {r['ok']}/{3 * n}",
                flush=True,
            )
            await asyncio.sleep(1.5)
    finally:
        for sim in sims:
            sim.stop()


async def run_route(base_urls: list[str], n: int, tag: str) -> dict:
    """A route of endpoints (`balance`), each its own door, in process."""
    from swarm_tui.providers.routes import RoutePlan

    profiles = [ProviderProfile(f"e{k}", base_url=url) for k, url in enumerate(base_urls)]
    tasks = [Task(j, f"r{j}", b) for j, b in enumerate(bodies(n, tag))]
    plan = RunPlan(profiles[0], EngineSettings(), route=RoutePlan(tuple(profiles[1:]), "balance"))
    with tempfile.TemporaryDirectory() as tmp:
        session = SwarmSession.open_new(Job("route", "bench", tasks), plan, Path(tmp) / "run")
        t0 = time.monotonic()
        try:
            finished = await session.run()
        finally:
            await session.aclose()
    return {"ok": finished.succeeded, "makespan_s": time.monotonic() - t0}


async def quota(repeat: int) -> None:
    n = 1000
    cfg = SimConfig(latency_ms=50.0, latency_sigma=0.2, seed=23)
    print(f"\nquota: {n} tasks, 50 ms, 20 in flight; the quota runs out for 10 s once 300 are done")
    from swarm_tui.core.events import RunSuspended, SuspensionEnded, TaskFailed

    with SimServer(cfg).start(mode="process") as sim:
        for i in range(repeat):
            sim.reset()
            sim.update_config(quota_at_s=None)
            seen: list = []
            done = [0]

            def watch(event, seen=seen, done=done) -> None:
                if isinstance(event, RunSuspended | SuspensionEnded | TaskFailed):
                    seen.append(event)
                if type(event).__name__ == "TaskSucceeded":
                    done[0] += 1
                    if done[0] == 300:
                        sim.update_config(quota_at_s=0.0, quota_for_s=10.0)

            profile = ProviderProfile("bench", base_url=sim.base_url)
            tasks = [Task(j, f"q{j}", b) for j, b in enumerate(bodies(n, f"quota{i}"))]
            with tempfile.TemporaryDirectory() as tmp:
                session = SwarmSession.open_new(
                    Job("quota", "bench", tasks), RunPlan(profile, EngineSettings.of(concurrency=20)), Path(tmp) / "run"
                )
                session.engine.subscribe(watch)
                t0 = time.monotonic()
                try:
                    finished = await session.run()
                finally:
                    await session.aclose()
            stats = sim.stats()
            tasks_paid = sum(v for p, v in stats["successes_by_prompt"].items() if p.startswith(f"quota{i}"))
            held = [e.suspended_s for e in seen if isinstance(e, SuspensionEnded)]
            print(
                f"  run {i + 1}: {finished.succeeded}/{n} done, {finished.failed} failed, answers paid for tasks "
                f"{tasks_paid}, suspensions {sum(isinstance(e, RunSuspended) for e in seen)} (held "
                f"{', '.join(f'{h:.1f}s' for h in held)}), {stats['quota_errors']} quota errors, "
                f"{time.monotonic() - t0:5.1f}s",
                flush=True,
            )


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False
    )
    parser.add_argument("--scenarios", default="adaptive,ratelimit,tail,slow,mixed,slowone,start,quota")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--headers",
        choices=["both", "yes", "no"],
        default="both",
        help="whether the simulator sends x-ratelimit-* headers (ratelimit, tail)",
    )
    parser.add_argument(
        "--no-article", action="store_true", help="tail: swarm-tui alone (the article's orchestrator takes 3x longer)"
    )
    args = parser.parse_args()
    chosen = args.scenarios.split(",")
    if "adaptive" in chosen:
        await adaptive(args.repeat)
    header_modes = {"both": (False, True), "yes": (True,), "no": (False,)}[args.headers]
    if "ratelimit" in chosen:
        for headers in header_modes:
            await ratelimit(args.repeat, headers)
    if "tail" in chosen:
        for headers in header_modes:
            await tail(args.repeat, headers, article=not args.no_article)
    if "slow" in chosen:
        await slow()
    if "mixed" in chosen:
        await mixed(args.repeat)
    if "slowone" in chosen:
        await slowone(args.repeat)
    if "start" in chosen:
        await start(args.repeat)
    if "quota" in chosen:
        await quota(args.repeat)


if __name__ == "__main__":
    asyncio.run(main())
