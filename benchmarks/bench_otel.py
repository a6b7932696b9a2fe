"""What `--otel` costs the swarm when the collector is down (the makespan moves < 5%).

    python benchmarks/bench_otel.py [--tasks 1000] [--repeats 3] [--concurrency 50] [--receiver]

The same N-task job against a zero-latency simulator in its own process (its CPU is not the
client's), headless, three ways interleaved in each repeat (the order reversed every other
one): no `--otel`; `--otel` to a loopback port where nothing listens (the collector down: the
tracer leaves the events unread, asks whether it is back, and counts the spans dropped at the
end); with `--receiver`, `--otel` to a real OTLP/HTTP receiver (tests/otlp_receiver.py, needs
opentelemetry-proto). Figures per run: the makespan
(summary.json's, first attempt's start to last attempt's end) and the session's wall time
(`run()` to the summary written: the live export's close included), the client process's CPU
time (the exporter's thread included; the simulator's not), and the spans dropped. The receiver
of `--receiver` runs in the client's process: its decoding is in that CPU figure too. The
first `--otel` run of a process also pays for importing the SDK (before the run starts).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from swarm_tui.core.task import Task
from swarm_tui.engine import EngineSettings
from swarm_tui.jobs import Job
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.run.session import RunPlan, SwarmSession
from swarm_tui.sim import SimConfig, SimServer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def make_job(n: int) -> Job:
    body = {"model": "sim-1", "max_tokens": 32}
    tasks = [Task(i, f"task-{i:05d}", {**body, "messages": [{"role": "user", "content": f"q {i}"}]}) for i in range(n)]
    return Job(f"bench-otel-{n}", "bench", tasks)


async def one_run(root: Path, name: str, base_url: str, n: int, concurrency: int, endpoint: str | None) -> dict:
    plan = RunPlan(ProviderProfile(name="custom", base_url=base_url), EngineSettings.of(concurrency=concurrency))
    session = SwarmSession.open_new(make_job(n), plan, root / name)
    if endpoint is not None:
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
        session.trace()
    started, cpu = time.perf_counter(), time.process_time()
    try:
        finished = await session.run()
    finally:
        await session.aclose()
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    assert finished.succeeded == n, finished
    assert session.summary is not None
    traces = session.summary.traces
    dropped, spans = (traces.dropped, traces.spans) if traces is not None else (None, None)
    return {"makespan": session.summary.makespan_s, "wall": wall, "cpu": cpu, "dropped": dropped, "spans": spans}


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--receiver", action="store_true", help="also export to a real loopback OTLP receiver")
    args = parser.parse_args()

    from tests.otlp_receiver import unused_url

    sim = SimServer(SimConfig(latency_ms=0.0, latency_sigma=0.0)).start(mode="process")
    receiver = None
    if args.receiver:
        from tests.otlp_receiver import OtlpReceiver

        receiver = OtlpReceiver().start()
    modes: dict[str, str | None] = {"no --otel": None, "--otel, collector down": unused_url()}
    if receiver is not None:
        modes["--otel, receiver up"] = receiver.url
    results: dict[str, list[dict]] = {mode: [] for mode in modes}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for repeat in range(args.repeats):
                order = list(modes.items())
                for number, (mode, endpoint) in enumerate(order if repeat % 2 == 0 else order[::-1]):
                    run = asyncio.run(
                        one_run(Path(tmp), f"r{repeat}-{number}", sim.base_url, args.tasks, args.concurrency, endpoint)
                    )
                    results[mode].append(run)
                    print(
                        f"repeat {repeat + 1} {mode:24} makespan {run['makespan']:.3f} s  wall {run['wall']:.3f} s"
                        f"  dropped {run['dropped']} of {run['spans']}",
                        flush=True,
                    )
    finally:
        sim.stop()
        if receiver is not None:
            receiver.stop()
    base = statistics.median(r["makespan"] for r in results["no --otel"])
    base_cpu = statistics.median(r["cpu"] for r in results["no --otel"])
    print(
        f"\n{args.tasks} tasks, zero-latency simulator in its own process, concurrency {args.concurrency}, "
        f"{args.repeats} repeats (medians):"
    )
    for mode, runs in results.items():
        makespan = statistics.median(r["makespan"] for r in runs)
        wall = statistics.median(r["wall"] for r in runs)
        cpu = statistics.median(r["cpu"] for r in runs)
        spread = ", ".join(f"{r['makespan']:.3f}" for r in runs)
        print(
            f"  {mode:24} makespan {makespan:.3f} s ({makespan / base:.3f}x; runs {spread})  wall {wall:.3f} s"
            f"  client cpu {cpu:.3f} s ({cpu / base_cpu:.3f}x)"
        )


if __name__ == "__main__":
    main()
