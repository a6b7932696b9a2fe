"""What the response cache (`--cache`) costs: a lookup per task at 100k entries, and a
run's makespan with the cache off, cold (every task a miss, every answer written) and warm
(every task a hit), on the same zero-latency simulator in the same run.

Store (CPU time of this process, `time.process_time`, best of --repeat rounds):

  key          request_key of a typical body (the SHA-256 of its canonical JSON)
  claim        a run's start: every task's key looked up, 500 keys per query (as the cache lane
               claims), in a cache of --entries answers of ~1 KB: microseconds per task
  one          one key per query (an agent's next step, a planner or judge call)
  put          an answer buffered and written (64 per transaction, as a run writes them)

Engine (wall clock, the simulator in its own process): N tasks, 50 in flight, cache off / cold /
warm: makespan and tasks/s. `off` is the engine's hot path as without the cache (two `is None`
checks per task); `warm` sends no request at all.

Usage:  python benchmarks/bench_cache.py [--entries 100000] [--tasks 2000] [--repeat 3] [--quick]
Figures depend on the machine and its disk (WAL, synchronous=NORMAL: commits do not wait for it).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from swarm_tui.cache import CacheEntry, CacheMode, CacheSettings, ResponseCache, request_key  # noqa: E402
from swarm_tui.core.task import Task  # noqa: E402
from swarm_tui.engine import EngineSettings  # noqa: E402
from swarm_tui.jobs import Job  # noqa: E402
from swarm_tui.providers.profile import ProviderProfile  # noqa: E402
from swarm_tui.run.session import RunPlan, SwarmSession  # noqa: E402
from swarm_tui.sim import SimConfig, SimServer  # noqa: E402

from bench_answers import typical_answer  # noqa: E402  the same ~1 KB chat completion

BASE_URL = "https://api.example.com/v1"


def body_of(i: int) -> dict:
    return {
        "model": "gpt-4.1-mini",
        "max_tokens": 256,
        "temperature": 0.2,
        "messages": [
            {"role": "system", "content": "You are sub-agent #7 of swarm/100."},
            {"role": "user", "content": f"Task {i}: summarise the findings in three sentences."},
        ],
    }


def best(rounds: int, work) -> float:
    """The least CPU time of `rounds` runs of `work()`."""
    times = []
    for _ in range(rounds):
        t0 = time.process_time()
        work()
        times.append(time.process_time() - t0)
    return min(times)


def bench_store(entries: int, repeat: int) -> None:
    answer = typical_answer()
    with tempfile.TemporaryDirectory() as tmp:
        cache = ResponseCache(Path(tmp), CacheMode.READ_WRITE)
        keys = [request_key(BASE_URL, None, body_of(i)) for i in range(entries)]
        t0 = time.monotonic()
        for key in keys:
            cache.put(CacheEntry(key, "gpt-4.1-mini", answer, "req-1", "stop", 40, 120, 0, 0, 0.0001))
        cache.flush()
        fill_s = time.monotonic() - t0
        size = cache.path.stat().st_size
        print(f"store: {entries:,} entries, {size / 1024**2:.0f} MiB, filled in {fill_s:.1f}s")

        sample = random.Random(1).sample(keys, min(5000, entries))
        bodies = [body_of(i) for i in range(1000)]
        key_s = best(repeat, lambda: [request_key(BASE_URL, None, b) for b in bodies]) / len(bodies)
        print(f"  key    {key_s * 1e6:8.1f} us per body")
        misses = [f"miss-{i}" for i in range(len(sample))]
        claim_s = best(repeat, lambda: cache.lookup(sample)) / len(sample)
        miss_s = best(repeat, lambda: cache.lookup(misses)) / len(misses)
        print(f"  claim  {claim_s * 1e6:8.1f} us per task (hits, 500 keys a query)   {miss_s * 1e6:6.1f} us per miss")
        one_s = best(repeat, lambda: [cache.lookup([k]) for k in sample[:1000]]) / 1000
        print(f"  one    {one_s * 1e6:8.1f} us per lookup (one key a query)")
        fresh = [f"new-{n}-{i}" for n in range(repeat) for i in range(2000)]
        chunks = iter([fresh[n * 2000 : (n + 1) * 2000] for n in range(repeat)])

        def put_all() -> None:
            for key in next(chunks):
                cache.put(CacheEntry(key, "gpt-4.1-mini", answer, "req-1", "stop", 40, 120, 0, 0, 0.0001))
            cache.flush()

        put_s = best(repeat, put_all) / 2000
        print(f"  put    {put_s * 1e6:8.1f} us per answer (written 64 a transaction)")
        cache.close()


async def run_engine(base_url: str, n: int, cache_dir: Path | None, mode: str) -> tuple[float, int]:
    tasks = [
        Task(
            i,
            f"t{i}",
            {"model": "sim-1", "max_tokens": 64, "messages": [{"role": "user", "content": f"cache bench task {i}"}]},
        )
        for i in range(n)
    ]
    settings = EngineSettings.of(concurrency=50)
    cache = CacheSettings(mode=mode, dir=str(cache_dir) if cache_dir else None)
    with tempfile.TemporaryDirectory() as tmp:
        plan = RunPlan(ProviderProfile("bench", base_url=base_url), settings, cache=cache)
        session = SwarmSession.open_new(Job("bench", "bench", tasks), plan, Path(tmp) / "run")
        t0 = time.monotonic()
        try:
            finished = await session.run()
        finally:
            await session.aclose()
        return time.monotonic() - t0, finished.succeeded


async def bench_engine(n: int, repeat: int) -> None:
    sim = SimServer(SimConfig(latency_ms=0.0, latency_sigma=0.0, seed=1)).start(mode="process")
    try:
        print(f"engine: {n:,} tasks, 50 in flight, zero-latency simulator (best of {repeat})")
        figures: dict[str, float] = {}
        for _ in range(repeat):  # the cases interleaved round by round
            with tempfile.TemporaryDirectory() as tmp:
                cache = Path(tmp)
                cases = (("off", None, "off"), ("cold (misses)", cache, "readwrite"), ("warm (hits)", cache, "read"))
                for name, directory, mode in cases:
                    makespan, ok = await run_engine(sim.base_url, n, directory, mode)
                    assert ok == n, (name, ok)
                    figures[name] = min(figures.get(name, makespan), makespan)
        for name, makespan in figures.items():
            print(
                f"  {name:<14} makespan {makespan:6.2f}s  {n / makespan:8.0f} tasks/s  "
                f"x{makespan / figures['off']:.2f} of off"
            )
    finally:
        sim.stop()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False
    )
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="10k entries, 500 tasks (a smoke run)")
    args = parser.parse_args()
    if args.quick:
        args.entries, args.tasks, args.repeat = 10_000, 500, 1
    bench_store(args.entries, args.repeat)
    asyncio.run(bench_engine(args.tasks, args.repeat))


if __name__ == "__main__":
    main()
