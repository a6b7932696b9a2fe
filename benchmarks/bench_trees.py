"""The engine's zero-latency ceiling of several checkouts of the project, interleaved: is a change
"not worse than before"?

Each round runs every tree once, in a new process (`PYTHONPATH=<tree>`, the same interpreter and
packages), in a rotating order so that none always goes first: one warm-up run of 500 tasks, then
a run of --tasks tasks (the simulator of that tree in its own process answering at once, 50 in
flight, plain bodies as `bench_engine.py --scenarios overhead` sends). Per tree it reports the
best and the median of the rounds in tasks/s and in CPU microseconds a task of the engine's
process (its ceiling's inverse, and far less sensitive than the wall clock to what else the
machine does), and each tree's median ratio to the first tree, round by round.

Usage:  python benchmarks/bench_trees.py TREE [TREE ...] [--tasks 3000] [--rounds 5]
        e.g. python benchmarks/bench_trees.py ../before . --rounds 7
A tree is a checkout (a `git worktree add ../before <commit>` of an older commit will do).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ONE_RUN = r"""
import asyncio, json, sys, time
sys.path.insert(0, "benchmarks")
from bench_engine import bodies, run_swarm
from swarm_tui.sim import SimConfig, SimServer

n = int(sys.argv[1])
sim = SimServer(SimConfig(latency_ms=0.0, latency_sigma=0.0)).start(mode="process")
try:
    asyncio.run(run_swarm(sim.base_url, bodies(500, "warm"), concurrency=50))
    cpu0 = time.process_time()
    result = asyncio.run(run_swarm(sim.base_url, bodies(n, "measured"), concurrency=50))
    cpu = time.process_time() - cpu0
finally:
    sim.stop()
assert result["ok"] == n, result
print(json.dumps({"tasks_s": n / result["makespan_s"], "cpu_us": cpu / n * 1e6}))
"""


def one_run(tree: Path, tasks: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, "-c", ONE_RUN, str(tasks)], cwd=tree, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"{tree}: the run failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--tasks", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    trees = [tree.resolve() for tree in args.trees]
    runs: dict[Path, list[dict[str, float]]] = {tree: [] for tree in trees}
    for round_ in range(args.rounds):
        order = trees[round_ % len(trees) :] + trees[: round_ % len(trees)]
        for tree in order:
            runs[tree].append(one_run(tree, args.tasks))
        said = "  ".join(f"{t.name} {runs[t][-1]['cpu_us']:.0f} us" for t in trees)
        print(f"round {round_ + 1}: {said}", flush=True)
    first = trees[0]
    print(f"\nzero-latency ceiling, {args.tasks:,} tasks, 50 in flight, {args.rounds} interleaved rounds:")
    for tree in trees:
        rates = [r["tasks_s"] for r in runs[tree]]
        cpus = [r["cpu_us"] for r in runs[tree]]
        ratios = [r["cpu_us"] / f["cpu_us"] for r, f in zip(runs[tree], runs[first], strict=True)]
        print(
            f"  {tree.name:<16} tasks/s best {max(rates):6.0f} median {statistics.median(rates):6.0f}   "
            f"CPU a task best {min(cpus):5.0f} us median {statistics.median(cpus):5.0f} us   "
            f"against {first.name}: median {statistics.median(ratios) - 1:+.1%} "
            f"({min(ratios) - 1:+.1%} to {max(ratios) - 1:+.1%})"
        )


if __name__ == "__main__":
    main()
