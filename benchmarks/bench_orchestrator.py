"""An orchestrator spawning its own sub-agents: makespan against the critical path, same run.

One orchestrator (`[orchestrator]`, the simulator's orchestrator mode: `[[sim:spawn=50+50]]`) spawns
50 sub-agents and waits for their answers, then a second wave of 50 built from those answers
(spawned without waiting, then `wait_agents`), then answers quoting all 100: 104 model calls, 5 of
them on the longest chain (the orchestrator's spawn, a first-wave agent, the second spawn, the
slower of a second-wave agent and the orchestrator's `wait_agents` call, the final answer). The
simulator runs in its own process (so it does not share the engine's GIL), every call 200 ms
(sigma 0.05).

  makespan   RunStarted to the orchestrator's answer journaled.
  critical   the critical path as the console shows it (`view.family.AgentTree`, from the run's
             events): the chain's calls at the latencies the client measured, the tools between
             them as measured (none here but the swarm tools, which count as their agents). What
             the makespan has beyond it is the engine's: admission, journal writes, the tool
             step's bookkeeping, dispatch. Goal: makespan <= 1.15 x critical.
  nominal    the chain's 5 calls at the simulator's 200 ms (what a zero-overhead client would take).

Each run is done with the adaptive limit (the default; ceiling 100, so it starts at 50: a wave of
50 goes out at once) and with the limit fixed at 100 (`--no-adaptive`).

Usage:  python benchmarks/bench_orchestrator.py [--repeat N] [--wave N] [--latency-ms MS] [--modes adaptive,fixed]
Ratios are against the critical path measured in the same run; absolute numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import textwrap
import time
from pathlib import Path

from swarm_tui.core.events import RunStarted, TaskFailed, TaskSucceeded
from swarm_tui.engine import EngineSettings
from swarm_tui.jobs import load_job
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.run.session import RunPlan, SwarmSession
from swarm_tui.sim import SimConfig, SimServer
from swarm_tui.view.run_view import RunView

GOAL = 1.15
SIGMA = 0.05
CHAIN_CALLS = 5


def job_file(directory: Path, wave: int) -> Path:
    path = directory / "orchestrate.toml"
    path.write_text(
        textwrap.dedent(f"""
        name = "bench-orchestrator"
        model = "sim-1"
        [request]
        max_tokens = 16384
        [orchestrator]
        goal = "Survey how LLM clients pace, retry and cache their calls [[sim:spawn={wave}+{wave}]]"
        max_agents = {2 * wave}
        max_spawn = {wave}
        """)
    )
    return path


async def run_once(base_url: str, wave: int, *, adaptive: bool) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        job = load_job(job_file(Path(tmp), wave))
        settings = EngineSettings.of(concurrency=2 * wave, adaptive=adaptive)
        session = SwarmSession.open_new(
            job, RunPlan(ProviderProfile("bench", base_url=base_url), settings), Path(tmp) / "run"
        )
        view = RunView(screen=False)
        session.engine.subscribe(view.observe)
        times: dict[str, float] = {}
        failed = [0]

        def clock(event) -> None:
            if isinstance(event, RunStarted):
                times["started"] = time.monotonic()
            elif isinstance(event, TaskSucceeded) and event.index == 0:
                times["answered"] = time.monotonic()
            elif isinstance(event, TaskFailed):
                failed[0] += 1

        session.engine.subscribe(clock)
        try:
            finished = await session.run()
        finally:
            await session.aclose()
    path = view.family.critical_path()
    assert path is not None and "answered" in times, "the orchestrator did not answer"
    return {
        "ok": finished.succeeded,
        "failed": failed[0],
        "makespan_s": times["answered"] - times["started"],
        "critical_s": path.seconds,
        "calls": path.calls,
        "levels": view.family.levels(finished.succeeded + finished.failed + finished.cancelled),
    }


async def main_async(args: argparse.Namespace) -> int:
    sim = SimServer(SimConfig(latency_ms=args.latency_ms, latency_sigma=SIGMA, seed=43)).start(mode="process")
    worst = 0.0
    try:
        latency, nominal = args.latency_ms, CHAIN_CALLS * args.latency_ms / 1000
        print(
            f"orchestrator: 1 + {args.wave} + {args.wave} sub-agents, simulator {latency:g} ms (sigma {SIGMA}), "
            f"nominal critical path {CHAIN_CALLS} x {latency:g} ms = {nominal:.2f}s"
        )
        await run_once(sim.base_url, 4, adaptive=True)  # warm-up: imports, the first connections
        for mode in args.modes.split(","):
            ratios = []
            for n in range(args.repeat):
                r = await run_once(sim.base_url, args.wave, adaptive=mode == "adaptive")
                ratio = r["makespan_s"] / r["critical_s"]
                ratios.append(ratio)
                print(
                    f"  {mode:8} run {n + 1}: {r['ok']} ok, {r['failed']} failed, levels {r['levels']}; makespan "
                    f"{r['makespan_s']:.3f}s, critical {r['critical_s']:.3f}s ({r['calls']} calls) -> {ratio:.3f}x"
                )
            worst = max(worst, max(ratios))
            print(f"  {mode:8} median {statistics.median(ratios):.3f}x, worst {max(ratios):.3f}x (goal <= {GOAL}x)")
    finally:
        sim.stop()
    return 0 if worst <= GOAL else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--wave", type=int, default=50, help="sub-agents per wave (two waves)")
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--modes", default="adaptive,fixed")
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
