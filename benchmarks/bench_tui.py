"""What the TUI costs the swarm: the same run headless and in the (headless) Textual app.

    python benchmarks/bench_tui.py [--tasks 2000] [--repeats 3] [--concurrency 50]

Measured, against a zero-latency simulator in its own process (so the server's CPU is not
the client's):

* makespan of the same N-task run, headless (`run_headless`) vs. the TUI (`make_app` +
  `run_test`, a real app with its timer, widgets and compositor, minus the terminal), as
  first-to-last event time; the ratio is what the TUI costs (goal: under 1.10);
* event-loop lag in the TUI run: a probe sleeps 5 ms in a loop and records how late it wakes,
  while the engine's events flow (their rate is printed);
* the 1,000-agent grid: a full repaint of every line from cold caches, and one drain tick
  applying 1,000 state changes (grid rows, panels, footer) inside `batch_update()`.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

from swarm_tui.config import Config
from swarm_tui.core.events import AttemptStarted, RunFinished, RunStarted
from swarm_tui.core.task import Task
from swarm_tui.engine import EngineSettings, TaskState
from swarm_tui.frontend.headless import run_headless
from swarm_tui.jobs import Job
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.run.session import RunPlan, SwarmSession
from swarm_tui.sim import SimConfig, SimServer
from swarm_tui.ui.app import make_app
from swarm_tui.ui.widgets.grid.agent_grid import AgentGrid


def make_job(n: int) -> Job:
    tasks = [
        Task(
            i,
            f"task-{i:05d}",
            {"model": "sim-1", "max_tokens": 32, "messages": [{"role": "user", "content": f"question {i}"}]},
        )
        for i in range(n)
    ]
    return Job(f"bench-{n}", "bench", tasks)


def open_session(root: Path, name: str, base_url: str, n: int, concurrency: int) -> SwarmSession:
    plan = RunPlan(
        ProviderProfile(name="custom", base_url=base_url), EngineSettings.of(concurrency=concurrency, timeout_s=30.0)
    )
    return SwarmSession.open_new(make_job(n), plan, root / name)


class Span:
    """First RunStarted to RunFinished, and how many events flowed in between."""

    def __init__(self) -> None:
        self.start = self.end = 0.0
        self.cpu_start = self.cpu_end = 0.0
        self.events = 0

    def __call__(self, event) -> None:
        self.events += 1
        if isinstance(event, RunStarted) and not self.start:
            self.start, self.cpu_start = time.perf_counter(), time.process_time()
        elif isinstance(event, RunFinished):
            self.end, self.cpu_end = time.perf_counter(), time.process_time()

    @property
    def seconds(self) -> float:
        return self.end - self.start

    @property
    def cpu_seconds(self) -> float:
        """CPU time of this process during the run (engine + UI; the simulator is another process):
        robust against other load on the machine, unlike wall time."""
        return self.cpu_end - self.cpu_start


async def probe_lag(span: Span, lags: list[float]) -> None:
    """How late a 5 ms sleep wakes up, sampled while the run is on."""
    while not span.end:
        t0 = time.perf_counter()
        await asyncio.sleep(0.005)
        if span.start and not span.end:
            lags.append((time.perf_counter() - t0 - 0.005) * 1000)


async def headless_run(session: SwarmSession) -> tuple[Span, list[float]]:
    span = Span()
    lags: list[float] = []
    session.engine.subscribe(span)
    prober = asyncio.create_task(probe_lag(span, lags))
    try:
        await run_headless(session, stream=io.StringIO())
    finally:
        await session.aclose()
        await prober
    return span, lags


async def tui_run(session: SwarmSession, root: Path) -> tuple[Span, list[float]]:
    span = Span()
    session.engine.subscribe(span)
    lags: list[float] = []
    app = make_app(session, config=Config(path=root / "config.toml"))
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            prober = asyncio.create_task(probe_lag(span, lags))
            await prober  # ends with the run; not `pilot.pause()`, which forces a repaint per call
            for _ in range(3000):  # the outputs are written (off the loop) after the run's last event
                if app.phase == "DONE":
                    break
                await asyncio.sleep(0.01)
            assert app.phase == "DONE", app.phase
            await pilot.press("q")
    finally:
        await session.aclose()
    return span, lags


def synthetic_flow(rate: int = 1000, seconds: float = 5.0, agents: int = 1000) -> tuple[float, list[float]]:
    """The TUI alone: `rate` engine events a second (start + success pairs over `agents` agents)
    fed to the app's listener from a loop task, no HTTP; returns (events/s achieved, lags)."""
    from swarm_tui.core.events import Attempt, TaskSucceeded
    from swarm_tui.core.usage import Usage

    root = Path(tempfile.mkdtemp(prefix="bench-flow-"))
    session = open_session(root, "flow", "http://127.0.0.1:9/v1", agents, 50)
    app = make_app(session, config=Config(path=root / "config.toml"), start=False)
    lags: list[float] = []
    sent = 0

    async def measure() -> None:
        nonlocal sent
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause(0.2)
            engine = session.engine
            span = Span()
            span.start = time.perf_counter()
            prober = asyncio.create_task(probe_lag(span, lags))
            t0 = time.perf_counter()
            batch = max(1, rate // 100)  # every 10 ms
            while time.perf_counter() - t0 < seconds:
                for _ in range(batch // 2):
                    i = sent // 2 % agents
                    engine.states[i] = TaskState.RUNNING
                    engine.outbox.emit(AttemptStarted(i, 1, "bench"))
                    attempt = Attempt(i, 1, "bench", time.time(), 12.0, "ok", 200, usage=Usage(20, 10))
                    engine.states[i] = TaskState.SUCCEEDED
                    engine.outbox.emit(TaskSucceeded(attempt, ""))
                    sent += 2
                await asyncio.sleep(0.01)
            span.end = time.perf_counter()
            await prober
            await pilot.press("q")

    try:
        started = time.perf_counter()
        asyncio.run(measure())
        elapsed = time.perf_counter() - started
    finally:
        asyncio.run(session.aclose())
    return sent / min(elapsed, seconds), lags


def grid_costs(n: int = 1000) -> tuple[float, float]:
    """(ms for a cold full repaint of the grid's visible lines, ms for a drain of n changes)."""
    root = Path(tempfile.mkdtemp(prefix="bench-grid-"))
    session = open_session(root, "grid", "http://127.0.0.1:9/v1", n, 50)
    app = make_app(session, config=Config(path=root / "config.toml"), start=False)
    result: dict[str, float] = {}

    async def measure() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause(0.2)
            grid = app.query_one(AgentGrid)
            engine = session.engine
            repaints = []
            for _ in range(20):
                grid.invalidate()
                t0 = time.perf_counter()
                for y in range(grid.size.height):
                    grid.render_line(y)
                repaints.append((time.perf_counter() - t0) * 1000)
            result["repaint"] = statistics.median(repaints)
            drains = []
            for round_ in range(10):
                state = TaskState.RUNNING if round_ % 2 == 0 else TaskState.SUCCEEDED
                for i in range(n):
                    engine.states[i] = state
                    app.view.observe(AttemptStarted(i, 1, "bench"))
                t0 = time.perf_counter()
                app.drain()
                await pilot.pause()  # the paint that the drain asked for
                drains.append((time.perf_counter() - t0) * 1000)
            result["drain"] = statistics.median(drains)
            await pilot.press("q")

    try:
        asyncio.run(measure())
    finally:
        asyncio.run(session.aclose())
    return result["repaint"], result["drain"]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False
    )
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=50)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-tui-"))
    sim = SimServer(SimConfig(latency_ms=0.0, latency_sigma=0.0, seed=1)).start(mode="process")
    headless, tui, headless_lags, tui_lags, rates, headless_cpu, tui_cpu = [], [], [], [], [], [], []
    try:
        asyncio.run(headless_run(open_session(root, "warmup", sim.base_url, 200, args.concurrency)))
        for r in range(args.repeats):
            # Alternate which mode goes first, so that drift in the machine's load cancels out.
            for mode in ("headless", "tui") if r % 2 == 0 else ("tui", "headless"):
                session = open_session(root, f"{mode}-{r}", sim.base_url, args.tasks, args.concurrency)
                if mode == "headless":
                    span, lag = asyncio.run(headless_run(session))
                    headless.append(span.seconds)
                    headless_cpu.append(span.cpu_seconds)
                    headless_lags.extend(lag)
                else:
                    span, lag = asyncio.run(tui_run(session, root))
                    tui.append(span.seconds)
                    tui_cpu.append(span.cpu_seconds)
                    tui_lags.extend(lag)
                    rates.append(span.events / span.seconds)
            print(
                f"  round {r + 1}: headless {headless[-1]:.2f}s ({headless_cpu[-1]:.2f} cpu-s)  "
                f"tui {tui[-1]:.2f}s ({tui_cpu[-1]:.2f} cpu-s)",
                file=sys.stderr,
            )
    finally:
        sim.stop()
    flow_rate, flow_lags = synthetic_flow()
    big_rate, big_lags = synthetic_flow(agents=10_000)
    repaint_ms, drain_ms = grid_costs(1000)
    h, t = statistics.median(headless), statistics.median(tui)

    def pct(lags: list[float], q: float) -> str:
        lags = sorted(lags)
        return f"{lags[min(len(lags) - 1, int(q * (len(lags) - 1)))]:.1f}" if lags else "-"

    def lag_row(lags: list[float]) -> str:
        return f"{pct(lags, 0.5)} / {pct(lags, 0.99)} / {pct(lags, 1.0)} ms"

    rows = [
        ("tasks / concurrency", f"{args.tasks} / {args.concurrency}, zero-latency sim (process)"),
        ("makespan headless (median)", f"{h:.2f} s  ({args.tasks / h:.0f} tasks/s)"),
        ("makespan TUI (median)", f"{t:.2f} s  ({args.tasks / t:.0f} tasks/s)"),
        ("TUI / headless, wall", f"{t / h:.3f}  (goal < 1.10; noisy on a shared machine)"),
        (
            "TUI / headless, CPU of the process",
            f"{statistics.median(tui_cpu) / statistics.median(headless_cpu):.3f}  "
            f"({statistics.median(headless_cpu):.2f} vs "
            f"{statistics.median(tui_cpu):.2f} cpu-s)",
        ),
        ("engine events in the TUI run", f"{statistics.median(rates):.0f} events/s"),
        ("loop lag, headless run p50/p99/max", lag_row(headless_lags)),
        ("loop lag, TUI run p50/p99/max", lag_row(tui_lags)),
        (f"loop lag, TUI alone at {flow_rate:.0f} ev/s", lag_row(flow_lags) + " (synthetic events, no HTTP)"),
        (f"the same, 10,000-agent grid, {big_rate:.0f} ev/s", lag_row(big_lags) + " (goal: p99 < 20 ms)"),
        ("1,000-agent grid: cold repaint", f"{repaint_ms:.2f} ms (all visible lines)"),
        ("1,000 state changes: one drain", f"{drain_ms:.2f} ms (grid + panels + paint)"),
    ]
    width = max(len(name) for name, _ in rows)
    print(f"{'measure':<{width}}  value")
    print(f"{'-' * width}  {'-' * 40}")
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
