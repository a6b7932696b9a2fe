"""Multi-step agents with tools: the agent loop against the swarm's critical path, same run.

Every scenario runs the same 100 agents, all at once (concurrency 100), each scripted to 4 tool
rounds and then its answer (`[[sim:tools=4]]`: 5 model calls; 1-3 tool calls per round, in
parallel), on a simulator at 200 ms (sigma 0.05) that runs in its own process so it does not share
the GIL. Each run is done twice: with the adaptive limit (the default: it starts at half the
ceiling, 50, and grows by one per clean answer) and with the limit fixed at the ceiling
(EngineSettings.of(adaptive=False), the CLI's --no-adaptive); only the first model calls of half the
agents can be held back by the adaptive start.

  mcp        tools via the bundled example MCP server (python -m swarm_tui.examples.mcp_tools over
             stdio, `processes` server processes per run, each agent on one of them: --processes
             1,2,3 runs each pool size; their start-up is not counted). Makespan, from
             RunStarted to the last answer journaled, against the critical path: the most any one
             agent needed, its 5 model calls at the simulator's 200 ms each plus its tool time as
             measured in the run (a round waits for the slowest of its parallel calls; from the
             ToolCallEnded events). Goal: <= 1.15x.
             Also shown: the critical path with the model latencies as the client measured them
             (what is left is dispatch), the critical path with every tool round at the tools'
             unloaded round trip (what is left includes queueing for the tools), the engine
             process's CPU time (near 100% of the makespan: its event loop is saturated), and
             where an agent's time went (answer -> step journaled -> tools -> results journaled ->
             next call sent), mean per agent and for the agent that finished last.
  mcp-http   the same server as one streamable-HTTP process (--http on a free loopback port),
             started before the runs: the other way to take the calls off one stdio pipe.
  roundtrip  the MCP round trip per tool call (p50/p95/max ms) in that run, against the same server
             called one call at a time with nothing else running (the floor, measured first), and
             a step's burst: 1.6 calls per agent at once, each agent as itself, nothing else
             running (what one stdio process answering in turn costs, and what a pool saves).
  python     the same agents with the example's plain functions as [[tools.python]] (same tools,
             same JSON schemas, so the simulator makes the same choices): the loop without MCP, so
             `mcp` minus `python` is the MCP overhead and the rest is the loop's.
  plain      the same swarm with tools off: one call per task (ideal: one 200 ms call).

Usage:  python benchmarks/bench_agents.py [--scenarios mcp,mcp-http,python,plain] [--repeat N] [--quick]
                                          [--processes 1,2] [--modes adaptive,fixed] [--rpm N]
                                          [--backend aiohttp|httpx] [--profile]
The backend is the client's default (aiohttp) unless --backend says otherwise.
Ratios are against the critical path or ideal measured in the same run; absolute numbers depend
on the machine (on 2 shared cores the engine, the simulator and the MCP server compete for CPU).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import io
import pstats
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from swarm_tui.core.events import AgentStepped, ConcurrencyChanged, RunStarted, TaskFailed, TaskSucceeded, ToolCallEnded
from swarm_tui.core.task import Task
from swarm_tui.engine import EngineSettings
from swarm_tui.jobs import Job
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.run.session import RunPlan, SwarmSession
from swarm_tui.sim import SimConfig, SimServer
from swarm_tui.tools import Toolbox
from swarm_tui.tools.spec import DEFAULT_MCP_PROCESSES, McpServerSpec, PythonToolSpec, ToolsSpec

LATENCY_MS = 200.0
SIGMA = 0.05
TOOL_ROUNDS = 4
CALLS = TOOL_ROUNDS + 1
GOAL = 1.15

EXAMPLE = "swarm_tui.examples.mcp_tools"
FUNCTIONS = ("lookup", "add", "multiply", "note", "notes")  # the server's order: the simulator picks alike


def mcp_tools(processes: int = DEFAULT_MCP_PROCESSES, url: str | None = None) -> ToolsSpec:
    """The example server over stdio with `processes` server processes, or at `url`."""
    server = (
        McpServerSpec("examples", url=url, where="tools.mcp[0]", processes=1)
        if url is not None
        else McpServerSpec("examples", (sys.executable, "-m", EXAMPLE), where="tools.mcp[0]", processes=processes)
    )
    return ToolsSpec(mcp=(server,), max_steps=CALLS + 1, tool_timeout_s=20.0, source="bench_agents")


PYTHON_TOOLS = ToolsSpec(
    python=tuple(PythonToolSpec(f"{EXAMPLE}:{fn}", where=f"tools.python[{i}]") for i, fn in enumerate(FUNCTIONS)),
    max_steps=CALLS + 1,
    tool_timeout_s=20.0,
    source="bench_agents",
)
LABELS = {
    "mcp": "tools via the example MCP server (stdio)",
    "mcp-http": "tools via the example MCP server (one streamable-HTTP process)",
    "python": "the same tools as Python functions",
    "plain": "tools off (one call per task)",
}
DEFAULT_BACKEND = ProviderProfile("default", base_url="http://127.0.0.1:1/v1").backend


def agent_tasks(n: int, tag: str) -> list[Task]:
    return [
        Task(
            i,
            f"agent-{i:03d}",
            {
                "model": "sim-1",
                "max_tokens": 1024,
                "messages": [
                    {"role": "system", "content": f"You are sub-agent #{i} of swarm/{n}. Use the tools, then answer."},
                    {
                        "role": "user",
                        "content": f"{tag}: research topic #{i}: look up what you need, compute a figure, "
                        f"note your finding, then answer. [[sim:tools={TOOL_ROUNDS}]]",
                    },
                ],
            },
        )
        for i in range(n)
    ]


# ------------------------------------------------------------------------------------------ one run


@dataclass
class Agent:
    calls: list[tuple[float, float]] = field(default_factory=list)
    """(sent, answered) wall-clock times of each model call that counted (a step or the answer)."""
    stepped: dict[int, float] = field(default_factory=dict)
    """step -> when its model call was journaled and shown (AgentStepped)."""
    tools: dict[int, list[tuple[float, float]]] = field(default_factory=lambda: defaultdict(list))
    """step -> (tool latency ms, when its result was journaled and shown) of each call."""
    done: float | None = None


@dataclass
class Recorder:
    """Every event of interest with the wall-clock time it was heard (listeners hear an event after
    the journal write that reports it)."""

    agents: dict[int, Agent] = field(default_factory=lambda: defaultdict(Agent))
    started: float | None = None
    cpu: list[float] = field(default_factory=lambda: [0.0, 0.0])
    """The engine process's CPU time at RunStarted and at the last answer."""
    failed: int = 0
    limits: list[tuple[float, int]] = field(default_factory=list)

    def __call__(self, event) -> None:
        now = time.time()
        if isinstance(event, RunStarted):
            self.started = now
            self.cpu = [time.process_time()] * 2
            self.limits.append((now, event.concurrency))
        elif isinstance(event, ConcurrencyChanged):
            self.limits.append((now, event.limit))
        elif isinstance(event, AgentStepped):
            a = self.agents[event.index]
            a.calls.append((event.attempt.started_at, event.attempt.started_at + event.attempt.latency_ms / 1000))
            a.stepped[event.step] = now
        elif isinstance(event, ToolCallEnded):
            self.agents[event.index].tools[event.step].append((event.latency_ms, now))
        elif isinstance(event, TaskSucceeded):
            a = self.agents[event.index]
            a.calls.append((event.attempt.started_at, event.attempt.started_at + event.attempt.latency_ms / 1000))
            a.done = now
            self.cpu[1] = time.process_time()
        elif isinstance(event, TaskFailed):
            self.failed += 1


async def _loop_lag(out: list[float]) -> None:
    """How late a 5 ms timer fires: the event loop's backlog."""
    while True:
        t = time.monotonic()
        await asyncio.sleep(0.005)
        out.append((time.monotonic() - t - 0.005) * 1000)


async def run_once(
    base_url: str,
    tasks: list[Task],
    tools: ToolsSpec | None,
    *,
    backend: str = DEFAULT_BACKEND,
    profile: cProfile.Profile | None = None,
    **settings,
) -> dict:
    rec = Recorder()
    lags: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        session = SwarmSession.open_new(
            Job("bench-agents", "bench", tasks, tools=tools),
            RunPlan(ProviderProfile("bench", base_url=base_url, backend=backend), EngineSettings.of(**settings)),
            Path(tmp) / "run",
        )
        session.engine.subscribe(rec)
        lag = asyncio.create_task(_loop_lag(lags))
        t0 = time.time()
        if profile is not None:
            profile.enable()
        try:
            finished = await session.run()
        finally:
            if profile is not None:
                profile.disable()
            lag.cancel()
            await session.aclose()
    assert rec.started is not None
    ends = [a.done for a in rec.agents.values() if a.done is not None]
    lags.sort()
    return {
        "ok": finished.succeeded,
        "failed": finished.failed,
        "rec": rec,
        "setup_s": rec.started - t0,
        "makespan_s": (max(ends) if ends else time.time()) - rec.started,
        "cpu_s": rec.cpu[1] - rec.cpu[0],
        "lag_p95_ms": pct(lags, 0.95),
    }


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return values[min(len(values) - 1, int(q * len(values)))]


PARTS = ["first slot", "model", "answer->journaled", "tools", "tool bookkeeping", "results->next call"]


def analyse(r: dict, tool_floor_ms: float) -> dict:
    """The critical paths and where each agent's time went."""
    rec: Recorder = r["rec"]
    nominal, measured, parts = [], [], []
    finished = [i for i, a in rec.agents.items() if a.done is not None]
    last = max(finished, key=lambda i: rec.agents[i].done or 0.0, default=None)
    for index, a in rec.agents.items():
        steps = sorted(a.stepped)
        tool_ms = sum(max(lat for lat, _ in a.tools[s]) for s in steps if a.tools[s])
        model_ms = sum((end - start) * 1000 for start, end in a.calls)
        nominal.append(len(a.calls) * LATENCY_MS + tool_ms)
        measured.append(model_ms + tool_ms)
        if a.done is None or len(a.calls) != len(steps) + 1:
            continue
        p = {
            "model": model_ms,
            "tools": tool_ms,
            "first slot": (a.calls[0][0] - rec.started) * 1000,
            "answer->journaled": 0.0,
            "tool bookkeeping": 0.0,
            "results->next call": 0.0,
        }
        for k, s in enumerate(steps):
            answered, journaled = a.calls[k][1], a.stepped[s]
            results_done = max((t for _, t in a.tools[s]), default=journaled)
            p["answer->journaled"] += (journaled - answered) * 1000
            p["tool bookkeeping"] += (results_done - journaled) * 1000 - max((lat for lat, _ in a.tools[s]), default=0)
            p["results->next call"] += (a.calls[k + 1][0] - results_done) * 1000
        p["end"] = (a.done - rec.started) * 1000
        p["last"] = index == last
        parts.append(p)
    top = max(limit for _, limit in rec.limits)
    ceiling_at = next(t for t, limit in rec.limits if limit >= top)
    rounds = max((len(a.stepped) for a in rec.agents.values()), default=0)
    return {
        "nominal_s": max(nominal, default=float("nan")) / 1000,
        "measured_s": max(measured, default=float("nan")) / 1000,
        "unloaded_s": ((rounds + 1) * LATENCY_MS + rounds * tool_floor_ms) / 1000,
        "parts": parts,
        "first_limit": rec.limits[0][1],
        "to_ceiling_s": ceiling_at - rec.started,
        "tool_lat": sorted(lat for a in rec.agents.values() for calls in a.tools.values() for lat, _ in calls),
    }


def breakdown(parts: list[dict]) -> str:
    if not parts:
        return "      (no agent finished)"
    mean = {k: statistics.fmean(p[k] for p in parts) for k in PARTS}
    text = "      where the time went, mean agent: " + ", ".join(f"{k} {mean[k]:.0f}" for k in PARTS) + " ms"
    last = next((p for p in parts if p["last"]), None)
    if last is not None:
        text += (
            "\n      the agent that finished last:  "
            + ", ".join(f"{k} {last[k]:.0f}" for k in PARTS)
            + f" ms; it ended at {last['end']:.0f} ms"
        )
    return text


# ------------------------------------------------------------------------------------------ scenarios


async def roundtrip_floor(tools: ToolsSpec, calls: int) -> list[float]:
    """The tools called one at a time with nothing else running: each call's latency in ms."""
    box = Toolbox(tools)
    await box.start()
    try:
        for _ in range(10):  # warm up
            await box.call("lookup", '{"term": "t-00000000 retries"}')
        lat = []
        for i in range(calls):
            name, args = [
                ("lookup", f'{{"term": "t-{i:08x} retries"}}'),
                ("add", '{"a": 2, "b": 3}'),
                ("note", f'{{"agent": "t-{i:08x}", "text": "found"}}'),
            ][i % 3]
            outcome = await box.call(name, args)
            assert outcome.ok, outcome.text
            lat.append(outcome.latency_ms)
    finally:
        await box.aclose()
    return sorted(lat)


async def burst_ms(tools: ToolsSpec, agents: int, repeat: int = 5) -> list[float]:
    """One step's worth of tool calls at once, nothing else running: 1.6 calls per agent (the
    simulator's mean), each agent calling as itself (a pool keeps it on one process). The wall
    time of each burst, in ms: with one stdio process it is about calls x its CPU per call."""
    box = Toolbox(tools)
    await box.start()
    try:
        calls = [(i % agents, f'{{"term": "t-{i:08x} retries"}}') for i in range(agents * 8 // 5)]
        await asyncio.gather(*(box.call("lookup", args, caller=caller) for caller, args in calls))  # warm up
        walls = []
        for _ in range(repeat):
            started = time.monotonic()
            await asyncio.gather(*(box.call("lookup", args, caller=caller) for caller, args in calls))
            walls.append((time.monotonic() - started) * 1000)
    finally:
        await box.aclose()
    return sorted(walls)


async def agents_scenario(
    sim: SimServer,
    kind: str,
    tools: ToolsSpec | None,
    n: int,
    repeat: int,
    modes: list[str],
    backend: str,
    floor: list[float],
    profile: bool,
    rpm: int | None = None,
) -> dict[str, list[dict]]:
    label = LABELS[kind.split(" ")[0]] + (f", RPM {rpm:,} told" if rpm else "")
    if tools is not None and tools.mcp and tools.mcp[0].url is None:
        label += f", {tools.mcp[0].processes} server process(es)"
    print(
        f"\n{kind}: {n} agents, {label}, simulator {LATENCY_MS:g} ms (sigma {SIGMA:g}), {n} in flight, "
        f"backend {backend}" + (f", {TOOL_ROUNDS} tool rounds + the answer" if tools else ""),
        flush=True,
    )
    if floor:
        print(
            f"  unloaded round trip (one call at a time, nothing else running): p50 {pct(floor, 0.5):.2f} ms  "
            f"p95 {pct(floor, 0.95):.2f} ms",
            flush=True,
        )
    out: dict[str, list[dict]] = {m: [] for m in modes}
    for i in range(repeat):
        for mode in modes:
            sim.reset()
            prof = cProfile.Profile() if profile and i == 0 else None
            r = await run_once(
                sim.base_url,
                agent_tasks(n, f"{kind}-{mode}-{i}"),
                tools,
                backend=backend,
                profile=prof,
                concurrency=n,
                timeout_s=30.0,
                adaptive=mode == "adaptive",
                rpm=rpm,
            )
            a = analyse(r, pct(floor, 0.5) if floor else 0.0)
            r.update(a)
            r["requests"] = sim.stats()["requests"]
            r["ratio"] = r["makespan_s"] / (a["nominal_s"] if tools else LATENCY_MS / 1000)
            r["ratio_measured"] = r["makespan_s"] / a["measured_s"]
            r["ratio_unloaded"] = r["makespan_s"] / a["unloaded_s"]
            out[mode].append(r)
            print(
                f"  run {i + 1} {mode + ' limit':<14} ok {r['ok']}/{n}  makespan {r['makespan_s']:5.2f}s  "
                f"requests {r['requests']}  engine CPU {r['cpu_s']:4.2f}s ({r['cpu_s'] / r['makespan_s']:.0%} of it)"
                f"  loop lag p95 {r['lag_p95_ms']:.0f} ms  limit {a['first_limit']} -> ceiling after "
                f"{a['to_ceiling_s']:.2f}s" + (f"  (start-up {r['setup_s']:.2f}s not counted)" if tools else ""),
                flush=True,
            )
            if tools is None:
                print(
                    f"      vs ideal (one {LATENCY_MS:g} ms call) {r['ratio']:5.2f}x; vs the slowest call as the "
                    f"client measured it {r['ratio_measured']:5.2f}x",
                    flush=True,
                )
            else:
                lat = a["tool_lat"]
                print(
                    f"      critical path {a['nominal_s']:.2f}s ({CALLS} x {LATENCY_MS:g} ms + its tools as "
                    f"measured) -> {r['ratio']:5.2f}x (goal <= {GOAL}x); with the model latencies measured "
                    f"{a['measured_s']:.2f}s -> {r['ratio_measured']:4.2f}x; with tools at their unloaded p50 "
                    f"{a['unloaded_s']:.2f}s -> {r['ratio_unloaded']:4.2f}x",
                    flush=True,
                )
                print(
                    f"      tool calls {len(lat)}: p50 {pct(lat, 0.5):.1f} ms  p95 {pct(lat, 0.95):.1f} ms  "
                    f"max {pct(lat, 1.0):.1f} ms",
                    flush=True,
                )
                print(breakdown(a["parts"]), flush=True)
            if prof is not None:
                text = io.StringIO()
                pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(15)
                print(
                    "      profile of the engine process (top 15 by own time):\n"
                    + "\n".join("      " + line for line in _from_header(text.getvalue()) if line.strip())
                )
            await asyncio.sleep(0.2)
    return out


def _from_header(report: str) -> list[str]:
    lines = report.splitlines()
    return lines[next((i for i, line in enumerate(lines) if "ncalls" in line), 0) :]


def summary(
    results: dict[str, dict[str, list[dict]]], floors: dict[str, list[float]], bursts: dict[str, list[float]]
) -> None:
    print("\nsummary (median of the runs, worst in brackets; x = makespan / critical path, or / one call when off):")
    for kind, by_mode in results.items():
        for mode, runs in by_mode.items():
            if not runs:
                continue
            ratios = [r["ratio"] for r in runs]
            line = (
                f"  {kind:<8} {mode:<8} makespan {statistics.median(r['makespan_s'] for r in runs):5.2f}s  "
                f"{statistics.median(ratios):5.2f}x ({max(ratios):.2f}x)"
            )
            if kind != "plain":
                lat = sorted(x for r in runs for x in r["tool_lat"])
                line += (
                    f"  vs measured-model path {statistics.median(r['ratio_measured'] for r in runs):4.2f}x"
                    f"  vs unloaded-tools path {statistics.median(r['ratio_unloaded'] for r in runs):4.2f}x"
                    f"  tool call p50 {pct(lat, 0.5):5.1f} ms p95 {pct(lat, 0.95):5.1f} ms"
                )
                verdict = (
                    "met"
                    if max(ratios) <= GOAL
                    else "met by the median only"
                    if statistics.median(ratios) <= GOAL
                    else "MISSED"
                )
                line += f"  goal <= {GOAL}x {verdict}"
            line += f"  engine CPU {statistics.median(r['cpu_s'] / r['makespan_s'] for r in runs):.0%} of the makespan"
            print(line)
    for kind, lat in floors.items():
        print(
            f"  {kind:<8} unloaded round trip: p50 {pct(lat, 0.5):.2f} ms  p95 {pct(lat, 0.95):.2f} ms "
            f"({len(lat)} calls one at a time)"
        )
    for kind, walls in bursts.items():
        print(
            f"  {kind:<8} a step's burst (1.6 calls per agent at once, no run going): median "
            f"{statistics.median(walls):.0f} ms ({walls[0]:.0f}-{walls[-1]:.0f}, {len(walls)} bursts)"
        )


@contextlib.contextmanager
def http_server():
    """The example server as one streamable-HTTP process on a free loopback port: its /mcp URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", EXAMPLE, "--http", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("the example MCP server did not start over HTTP") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False
    )
    parser.add_argument("--scenarios", default="mcp,python,plain", help="of mcp, mcp-http, python, plain")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--agents", type=int, default=100, help="agents, all in flight at once (default 100)")
    parser.add_argument("--modes", default="adaptive,fixed", help="adaptive and/or fixed (--no-adaptive)")
    parser.add_argument(
        "--processes",
        default=str(DEFAULT_MCP_PROCESSES),
        help=f"stdio server processes of the mcp scenario, one run each (default {DEFAULT_MCP_PROCESSES})",
    )
    parser.add_argument(
        "--backend",
        choices=["httpx", "aiohttp"],
        default=DEFAULT_BACKEND,
        help=f"the client's HTTP backend (default {DEFAULT_BACKEND}, the client's own)",
    )
    parser.add_argument(
        "--rpm",
        type=int,
        default=None,
        help="tell the engine the provider's RPM (the CLI's --rpm): with a limit known, the run starts at once "
        "instead of sending one call and waiting for its answer (the first word) to learn the limits",
    )
    parser.add_argument("--profile", action="store_true", help="cProfile the engine process in the first run of each")
    parser.add_argument("--quick", action="store_true", help="30 agents, one run of each (a smoke run)")
    args = parser.parse_args()
    chosen = args.scenarios.split(",")
    n, repeat = (30, 1) if args.quick else (args.agents, args.repeat)
    modes = args.modes.split(",")
    with contextlib.ExitStack() as stack:
        scenarios: dict[str, ToolsSpec | None] = {}
        if "mcp" in chosen:
            for processes in (int(p) for p in args.processes.split(",")):
                scenarios[f"mcp x{processes}"] = mcp_tools(processes)
        if "mcp-http" in chosen:
            scenarios["mcp-http"] = mcp_tools(url=stack.enter_context(http_server()))
        if "python" in chosen:
            scenarios["python"] = PYTHON_TOOLS
        if "plain" in chosen:
            scenarios["plain"] = None
        floors: dict[str, list[float]] = {}
        bursts: dict[str, list[float]] = {}
        for kind, tools in scenarios.items():  # first, on a quiet machine
            if tools is not None:
                floors[kind] = await roundtrip_floor(tools, 100 if args.quick else 300)
                bursts[kind] = await burst_ms(tools, n)
        results: dict[str, dict[str, list[dict]]] = {}
        with SimServer(SimConfig(latency_ms=LATENCY_MS, latency_sigma=SIGMA, seed=7)).start(mode="process") as sim:
            for kind, tools in scenarios.items():
                results[kind] = await agents_scenario(
                    sim, kind, tools, n, repeat, modes, args.backend, floors.get(kind, []), args.profile, args.rpm
                )
    summary(results, floors, bursts)


if __name__ == "__main__":
    asyncio.run(main())
