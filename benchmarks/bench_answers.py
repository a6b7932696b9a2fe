"""What checking an answer costs: reading a provider's 200 as a chat completion, before and after
answers were held to strict JSON (`swarm_tui.providers.answer`).

Cases, each on a typical answer of about 1 KB (a chat completion of ~150 words):

  before       the body parsed as a chat completion and kept as received (what the client did)
  after        the same, through `strict_answer` first (one strict parse, shared with the shape
               check, and a few substring checks): the common case
  after+key    the same with an API key registered (each answer is also searched for its spellings),
               against before+key (the old path with the key registered: it does not search)
  rewrite      an answer with a BOM, read and written again canonically (the rare case)
  stream-body  a streamed answer's assembled body encoded under the same rules (`strict_body`)
  verdict      an answer checked against the json_schema its body asks for (`engine.answers`:
               the robust JSON read and the schema's validation), per answer

And what checking answers costs the engine (`--ceiling`): the zero-latency ceiling
(tasks/s of a whole run, 50 in flight, the simulator in its own process answering at once) of a
job whose every body asks for a `json_schema`, with the answer checks on and with them off (the
verdict skipped, everything else the same: the same bodies, the same JSON answers), the runs
interleaved (off, on, off, on...) so that the machine's load hits both alike; best of --runs.

And the same in instructions (`--count`): each run (checks off, checks on, each at two sizes) in a
fresh process under valgrind's cachegrind, one at a time (instructions executed, counted, not
timed: the same run counts within a third of a percent, where its time varies by several), the instructions a
task being the difference between the sizes over the difference in tasks (what a run costs
whatever its size: imports, the warm-up, the start, cancel out). The simulator runs in its own
process, not counted. Needs `valgrind` (Debian: `apt-get install valgrind`); takes minutes.

Usage:  python benchmarks/bench_answers.py [--repeat 5] [--number 20000] [--ceiling] [--tasks 3000] [--runs 3]
                                           [--count] [--count-sizes 500,3000] [--count-runs 1]
Figures are microseconds per answer, the best of --repeat runs; `after / before` is the ratio in
the same run. Absolute numbers depend on the machine and its load (check `ps aux` first).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path

from swarm_tui.core.task import Task
from swarm_tui.core.usage import Usage
from swarm_tui.engine import EngineSettings, answers
from swarm_tui.engine.settings import AnswerSettings
from swarm_tui.jobs import Job
from swarm_tui.providers.answer import MAX_ANSWER_BYTES, strict_answer, strict_body
from swarm_tui.providers.client import CallResult, chat_completion_or_raise
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.util import secrets

KEY = "sk-bench-0123456789abcdefABCDEF0123456789"


def typical_answer() -> bytes:
    body = {
        "id": "chatcmpl-0123456789ab",
        "object": "chat.completion",
        "created": 1718000000,
        "model": "gpt-4.1-mini",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Here is a typical answer, caf\u00e9. " * 28},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 120, "completion_tokens": 180, "total_tokens": 300},
    }
    return json.dumps(body, ensure_ascii=False).encode()


def before(content: bytes) -> CallResult:
    data = chat_completion_or_raise(content, "application/json", 200, "req-1")
    return CallResult(body=data, usage=Usage.from_response(data.get("usage")), request_id="req-1", raw=content)


def after(content: bytes) -> CallResult:
    content, parsed = strict_answer(content, 200, "req-1", MAX_ANSWER_BYTES)
    data = chat_completion_or_raise(content, "application/json", 200, "req-1", parsed)
    return CallResult(body=data, usage=Usage.from_response(data.get("usage")), request_id="req-1", raw=content)


def measure(cases: dict, number: int, repeat: int) -> dict[str, float]:
    """Best microseconds per call of each case, the cases interleaved round by round (a load that
    comes and goes on the machine then hits them all alike)."""
    best = dict.fromkeys(cases, float("inf"))
    for _ in range(repeat):
        for name, (fn, arg) in cases.items():
            seconds = timeit.timeit(functools.partial(fn, arg), number=number)
            best[name] = min(best[name], seconds / number * 1e6)
    return best


SCHEMA = {
    "type": "object",
    "properties": {
        "status": {"type": "string", "enum": ["open", "closed", "blocked"]},
        "score": {"type": "integer", "minimum": 1, "maximum": 5},
        "title": {"type": "string"},
    },
    "required": ["status", "score", "title"],
    "additionalProperties": False,
}


def checked_body(i: int) -> dict:
    return {
        "model": "sim-1",
        "max_tokens": 200,
        "messages": [{"role": "user", "content": f"Classify ticket {i}"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "ticket", "schema": SCHEMA}},
    }


def checked_answer() -> CallResult:
    content = json.dumps({"status": "open", "score": 3, "title": "Sim answer to: Classify ticket 7"})
    body = json.loads(typical_answer())
    body["choices"][0]["message"]["content"] = content
    return CallResult(body=body, usage=Usage(1, 1), request_id="req-1")


def verdict_case(checks: answers.AnswerChecks):
    body = checked_body(7)
    return lambda result: checks.verdict(body, result)


CHECKING = [0.0, 0]
"""Seconds spent in the answer checks of the runs with checks on, and how many answers they judged."""


async def ceiling_run(base_url: str, n: int, checks_on: bool, *, timed: bool = True) -> tuple[float, float]:
    """(tasks/s, CPU us a task in this process) of one whole run of `n` checked tasks at 50 in
    flight; the verdict skipped when off. The engine is CPU-bound at its ceiling, so its CPU time a
    task is the ceiling's inverse, and far less sensitive than the wall clock to a loaded machine."""
    from swarm_tui.run.session import RunPlan, SwarmSession

    original = answers.AnswerChecks.verdict
    if not checks_on:
        answers.AnswerChecks.verdict = lambda self, body, result: answers.USABLE  # type: ignore[method-assign]
    elif timed:  # timed where they run: what the checks themselves take, whatever else loads the machine

        def timed_verdict(self: answers.AnswerChecks, body: dict, result: CallResult) -> answers.Verdict:
            t = time.perf_counter()
            try:
                return original(self, body, result)
            finally:
                CHECKING[0] += time.perf_counter() - t
                CHECKING[1] += 1

        answers.AnswerChecks.verdict = timed_verdict  # type: ignore[method-assign]
    try:
        tasks = [Task(i, f"t{i}", checked_body(i)) for i in range(n)]
        with tempfile.TemporaryDirectory() as tmp:
            plan = RunPlan(ProviderProfile("bench", base_url=base_url), EngineSettings.of(concurrency=50))
            session = SwarmSession.open_new(Job("bench", "bench", tasks), plan, Path(tmp) / "run")
            t0, cpu0 = time.monotonic(), time.process_time()
            try:
                finished = await session.run()
            finally:
                await session.aclose()
            wall, cpu = time.monotonic() - t0, time.process_time() - cpu0
            assert finished.succeeded == n, finished
            return n / wall, cpu / n * 1e6
    finally:
        answers.AnswerChecks.verdict = original  # type: ignore[method-assign]


def ceiling(n: int, runs: int) -> None:
    from swarm_tui.sim import SimConfig, SimServer

    sim = SimServer(SimConfig(latency_ms=0.0, latency_sigma=0.0)).start(mode="process")
    rate = {"off": 0.0, "on": 0.0}
    cpu = {"off": float("inf"), "on": float("inf")}
    paired: list[float] = []
    try:
        asyncio.run(ceiling_run(sim.base_url, min(n, 500), True))  # warm-up: imports, the schema compiled
        for run in range(runs):
            this_round: dict[str, float] = {}
            for name in ("off", "on") if run % 2 == 0 else ("on", "off"):  # neither always goes first
                tasks_s, cpu_us = asyncio.run(ceiling_run(sim.base_url, n, name == "on"))
                rate[name], cpu[name] = max(rate[name], tasks_s), min(cpu[name], cpu_us)
                this_round[name] = cpu_us
            paired.append(this_round["on"] / this_round["off"] - 1)
    finally:
        sim.stop()
    print(f"zero-latency ceiling, {n:,} tasks asking for a json_schema, 50 in flight (best of {runs}, interleaved):")
    for name in ("off", "on"):
        print(f"  checks {name:<4} {rate[name]:8.0f} tasks/s   {cpu[name]:7.0f} us of CPU a task")
    print(f"  checking costs {cpu['on'] / cpu['off'] - 1:+.1%} of the engine's CPU a task (its ceiling's inverse)")
    inside = CHECKING[0] / CHECKING[1] * 1e6
    print(
        f"  inside those runs the checks took {inside:.1f} us an answer: {inside / cpu['on']:.1%} of the CPU a task"
        " (timed where they run)"
    )
    paired.sort()
    print(
        f"  round by round (on against the off run beside it): median {statistics.median(paired):+.1%}, "
        f"from {paired[0]:+.1%} to {paired[-1]:+.1%}"
    )


def counted_run(base_url: str, n: int, checks_on: bool, out: Path) -> int:
    """Instructions one fresh process executes to warm up and then run `n` checked tasks (cachegrind)."""
    command = [
        "valgrind",
        "--tool=cachegrind",
        "--cache-sim=no",
        f"--cachegrind-out-file={out}",
        sys.executable,
        __file__,
        "--counted-child",
        base_url,
        str(n),
        "on" if checks_on else "off",
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"a counted run failed ({' '.join(command)}):\n{done.stderr[-2000:]}")
    for line in out.read_text().splitlines():
        if line.startswith("summary:"):
            return int(line.split()[1])
    raise SystemExit(f"no summary line in {out}")


def counted_child(base_url: str, n: int, checks_on: bool) -> None:
    asyncio.run(ceiling_run(base_url, 200, checks_on, timed=False))  # warm-up, as the timed ceiling has
    asyncio.run(ceiling_run(base_url, n, checks_on, timed=False))


def count(sizes: tuple[int, int], runs: int) -> None:
    from swarm_tui.sim import SimConfig, SimServer

    if shutil.which("valgrind") is None:
        raise SystemExit("--count needs valgrind (Debian: apt-get install valgrind)")
    small, large = sizes
    sim = SimServer(SimConfig(latency_ms=0.0, latency_sigma=0.0)).start(mode="process")
    per_task: dict[str, list[float]] = {"off": [], "on": []}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for run in range(runs):
                for name in ("off", "on") if run % 2 == 0 else ("on", "off"):
                    # one at a time: a run counted beside another meets its answers in other batches
                    # (its loop's turns differ), which moved an "off" run's count by 1.7%, against 0.3% alone
                    small_run, large_run = (
                        counted_run(sim.base_url, n, name == "on", Path(tmp) / f"{name}.{n}.{run}")
                        for n in (small, large)
                    )
                    per_task[name].append((large_run - small_run) / (large - small))
    finally:
        sim.stop()
    print(
        f"instructions a task, counted (cachegrind; {large:,} tasks less {small:,}, asking for a json_schema, "
        f"50 in flight, zero latency; {runs} run(s)):"
    )
    for name in ("off", "on"):
        print(f"  checks {name:<4} {' '.join(f'{i:,.0f}' for i in per_task[name])}")
    ratios = [on / off - 1 for off, on in zip(per_task["off"], per_task["on"], strict=True)]
    mean = statistics.fmean(per_task["on"]) / statistics.fmean(per_task["off"]) - 1
    print(
        f"  checking costs {' '.join(f'{r:+.1%}' for r in ratios)} of the engine's instructions a task"
        f" ({mean:+.1%} over all runs)"
    )


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--counted-child":  # one run under cachegrind (`count`)
        counted_child(sys.argv[2], int(sys.argv[3]), sys.argv[4] == "on")
        return
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--number", type=int, default=20000)
    parser.add_argument("--ceiling", action="store_true", help="also the engine's zero-latency ceiling, checks on/off")
    parser.add_argument("--tasks", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--count", action="store_true", help="also instructions a task, checks on/off (valgrind)")
    parser.add_argument("--count-sizes", default="500,3000", help="the two run sizes whose difference is counted")
    parser.add_argument("--count-runs", type=int, default=1)
    args = parser.parse_args()
    answer = typical_answer()
    body = json.loads(answer)
    print(f"a typical answer: {len(answer):,} bytes")
    figures = measure(
        {
            "before": (before, answer),
            "after": (after, answer),
            "rewrite": (after, b"\xef\xbb\xbf" + answer),
            "stream-body": (lambda b: strict_body(b, MAX_ANSWER_BYTES), body),
            "verdict": (verdict_case(answers.AnswerChecks(None, AnswerSettings())), checked_answer()),
        },
        args.number,
        args.repeat,
    )
    secrets.register(KEY)  # from here on every answer is searched for the key's spellings
    figures |= measure({"before+key": (before, answer), "after+key": (after, answer)}, args.number, args.repeat)
    for name, us in figures.items():
        print(f"  {name:<12} {us:7.2f} us per answer")
    extra, keyed = figures["after"] - figures["before"], figures["after+key"] - figures["before+key"]
    ratio = figures["after"] / figures["before"]
    print(f"  after / before: {ratio:.2f}x (+{extra:.2f} us); with a key: +{keyed:.2f} us")
    if args.ceiling:
        ceiling(args.tasks, args.runs)
    if args.count:
        small, large = (int(n) for n in args.count_sizes.split(","))
        count((small, large), args.count_runs)


if __name__ == "__main__":
    main()
