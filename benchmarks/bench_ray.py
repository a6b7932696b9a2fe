"""Scale-out on Ray: tasks/s of one swarm with 1 and 2 worker actors on the zero-latency simulator.

Also the single-process engine on the same simulator, as the baseline, and one rate-limited
run that shows the shared budget: 2 actors against an RPM limit send at the limit in total; and
`--agents N` multi-step agents (each 4 tool steps then its answer, the bundled example MCP
server, the simulator at 200 ms) here and on 2 actors (whose MCP servers run on the actors):
the makespan of each, first dispatch to last answer, and the ratio.

The simulator runs in its own process (it must not share the driver's GIL); Ray is a local
instance with `--cpus` CPUs. On a 2-core machine the driver, the simulator, the raylet and
the actors all share two cores, so 2 actors cannot double anything here: the figures say what
the distribution costs per task, and that the budget holds, not what a cluster would reach.

Usage:  python benchmarks/bench_ray.py [--tasks 3000] [--concurrency 50] [--cpus 2] [--rpm 6000] [--agents 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import ray  # noqa: E402
from swarm_tui.engine import EngineSettings  # noqa: E402
from swarm_tui.jobs import load_job  # noqa: E402
from swarm_tui.providers.profile import ProviderProfile  # noqa: E402
from swarm_tui.run.session import RayOptions, RunPlan, SwarmSession  # noqa: E402
from swarm_tui.sim import SimConfig, SimServer  # noqa: E402
from swarm_tui.tools import ToolsSpec  # noqa: E402
from swarm_tui.tools.spec import McpServerSpec  # noqa: E402


def write_job(path: Path, n: int, prompt: str = "bench {i}") -> Path:
    with path.open("w") as fh:
        for i in range(n):
            fh.write(
                json.dumps(
                    {
                        "custom_id": f"t-{i:05d}",
                        "method": "POST",
                        "url": "/v1/chat/completions",
                        "body": {
                            "model": "sim-1",
                            "max_tokens": 16,
                            "messages": [{"role": "user", "content": prompt.format(i=i)}],
                        },
                    }
                )
                + "\n"
            )
    return path


async def one_run(
    base_url: str,
    n: int,
    concurrency: int,
    actors: int | None,
    rpm: int | None,
    backend: str,
    *,
    adaptive: bool | None = None,
    agents: bool = False,
) -> dict:
    """`agents`: every task a multi-step agent (4 tool steps) with the example MCP server."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        job = load_job(write_job(tmp / "job.jsonl", n, "agent {i} [[sim:tools=4]]" if agents else "bench {i}"))
        if agents:
            server = McpServerSpec("examples", (sys.executable, "-m", "swarm_tui.examples.mcp_tools"))
            job = replace(job, tools=ToolsSpec(mcp=(server,), max_steps=6, source="bench"))
        profile = ProviderProfile(name="custom", base_url=base_url, backend=backend)
        adaptive = rpm is not None if adaptive is None else adaptive
        plan = RunPlan(profile, EngineSettings.of(concurrency=concurrency, rpm=rpm, adaptive=adaptive))
        session = SwarmSession.open_new(job, plan, tmp / "run", ray=RayOptions(actors=actors) if actors else None)
        if actors:  # actors up and connected before the clock starts (their start is not the swarm's speed)
            session.engine.pool.ensure()
            await session.engine.pool.ping()
            if agents:  # and their tools' servers (here they start before RunStarted, off the clock)
                await asyncio.gather(*(actor.start_tools.remote(job.tools) for actor in session.engine.actors))
        clock: dict[str, float] = {}
        session.engine.subscribe(lambda event: clock.setdefault(type(event).__name__, time.perf_counter()))
        t0 = time.perf_counter()
        try:
            finished = await session.run()
        finally:
            await session.aclose()
        # agents: first dispatch to the last answer (the local run starts its tools inside run())
        elapsed = clock["RunFinished"] - clock["RunStarted"] if agents else time.perf_counter() - t0
        summary = json.loads((tmp / "run" / "summary.json").read_text())
    return {
        "actors": actors or 0,
        "tasks": n,
        "succeeded": finished.succeeded,
        "seconds": round(elapsed, 2),
        "tasks_per_s": round(n / elapsed, 1),
        "rate_limited": summary["requests"]["rate_limited"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=3000)
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--rpm", type=int, default=6000, help="the rate-limited run's limit (0: skip it)")
    ap.add_argument("--backend", choices=["httpx", "aiohttp"], default="aiohttp")
    ap.add_argument(
        "--untold-rpm",
        type=int,
        default=3000,
        help="a run of 1,000 tasks at 200 ms against this RPM, the limit NOT told (0: skip it)",
    )
    ap.add_argument("--only-untold", action="store_true", help="run only the untold-limit run")
    ap.add_argument("--agents", type=int, default=0, help="N multi-step agents here and on 2 actors (0: skip)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each agents case (their median is shown)")
    args = ap.parse_args()
    ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
    fast = SimServer(SimConfig(latency_ms=0, latency_sigma=0)).start(mode="process")
    rows = []
    try:
        for actors in () if args.only_untold or args.agents else (None, 1, 2):
            rows.append(asyncio.run(one_run(fast.base_url, args.tasks, args.concurrency, actors, None, args.backend)))
            print(rows[-1], flush=True)
        if args.agents:
            agents_rows(args, rows)
        if args.untold_rpm and not args.agents:
            untold = SimServer(SimConfig(latency_ms=200, latency_sigma=0.3, rpm=args.untold_rpm)).start(mode="process")
            try:
                row = asyncio.run(
                    one_run(untold.base_url, 1000, args.concurrency, 2, None, args.backend, adaptive=True)
                )
                row["limit_per_s"] = round(args.untold_rpm / 60, 1)
                row["untold"] = True
                row["requests"] = untold.stats()["requests"]
                rows.append(row)
                print(row, flush=True)
            finally:
                untold.stop()
        if args.rpm and not args.only_untold and not args.agents:
            limited = SimServer(SimConfig(latency_ms=0, latency_sigma=0, rpm=args.rpm)).start(mode="process")
            try:
                n = max(args.rpm // 60 * 8, 200)
                row = asyncio.run(one_run(limited.base_url, n, args.concurrency, 2, args.rpm, args.backend))
                row["limit_per_s"] = round(args.rpm / 60, 1)
                rows.append(row)
                print(row, flush=True)
            finally:
                limited.stop()
    finally:
        fast.stop()
        ray.shutdown()
    print()
    print(f"{'engine':<26}{'tasks':>7}{'seconds':>9}{'tasks/s':>9}{'429s':>6}")
    for r in rows:
        name = "single process" if not r["actors"] else f"Ray, {r['actors']} actor(s)"
        name += ", agents" if r.get("agents") else ""
        if "limit_per_s" in r:
            name += f", {r['limit_per_s']:g}/s limit" + (" not told" if r.get("untold") else "")
        print(f"{name:<26}{r['tasks']:>7}{r['seconds']:>9}{r['tasks_per_s']:>9}{r['rate_limited']:>6}")


def agents_rows(args, rows: list[dict]) -> None:
    """N agents at 200 ms, here and on 2 actors, `--repeat` times each (interleaved): medians."""
    sim = SimServer(SimConfig(latency_ms=200, latency_sigma=0.05)).start(mode="process")
    try:
        runs: dict[int, list[dict]] = {0: [], 2: []}
        for _ in range(args.repeat):
            for actors in (None, 2):
                row = asyncio.run(
                    one_run(sim.base_url, args.agents, args.agents, actors, None, args.backend, agents=True)
                )
                print(row, flush=True)
                runs[actors or 0].append(row)
        for done in runs.values():
            done.sort(key=lambda r: r["seconds"])
            rows.append({**done[len(done) // 2], "agents": True})
        here, on_ray = rows[-2]["seconds"], rows[-1]["seconds"]
        print(
            f"agents: {args.agents} of 5 model calls each; here {here} s, on 2 actors {on_ray} s "
            f"({on_ray / here:.2f}x), median of {args.repeat}"
        )
    finally:
        sim.stop()


if __name__ == "__main__":
    main()
