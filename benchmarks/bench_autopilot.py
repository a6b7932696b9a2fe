"""The autopilot on its own scenario (a deadline, a budget, a batch turnaround), through the real CLI.

    python benchmarks/bench_autopilot.py [--tasks 2000] [--scenarios tight,roomy,broke]

A simulator in its own process answers in 200 ms, allows 600 RPM (not told: learned from its
headers) and turns a batch around in 20 s; the job's model is priced with batch rates (half).
Live alone, 2,000 tasks take 200 s.

* tight: `--deadline 90s`: the makespan, and the cost against the same answers all live;
* roomy: `--deadline 10m`: the share of the tasks answered at the batch price;
* broke: `--deadline 30s --budget 0.01`: when the plan said it could not, and what was spent.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from swarm_tui.sim import SimConfig, SimServer

from bench_routes import MODEL, write_job


def run(tmp: Path, sim: SimServer, n: int, flags: list[str]) -> tuple[dict, Path, float]:
    out = tmp / f"run-{len(list(tmp.glob('run-*')))}"
    job = write_job(tmp / "job.jsonl", n, out.name)
    cmd = [sys.executable, "-m", "swarm_tui", "run", str(job), "--headless", "--base-url", sim.base_url]
    cmd += ["--model", MODEL, "--out", str(out), *flags]
    started = time.time()
    subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy(), timeout=900)
    summary = json.loads((out / "summary.json").read_text())
    sim.reset()
    return summary, out, started


def lanes(out: Path) -> tuple[int, int, float, float]:
    """(answers live, answers as batch lines, USD live, USD as batch lines)."""
    with sqlite3.connect(out / "journal.sqlite") as db:
        row = db.execute(
            "SELECT SUM(outcome = 'ok' AND endpoint NOT LIKE '%/batch'), "
            "SUM(outcome = 'ok' AND endpoint LIKE '%/batch'), "
            "COALESCE(SUM(CASE WHEN endpoint NOT LIKE '%/batch' THEN cost_usd END), 0), "
            "COALESCE(SUM(CASE WHEN endpoint LIKE '%/batch' THEN cost_usd END), 0) FROM attempts"
        ).fetchone()
    return row[0] or 0, row[1] or 0, row[2], row[3]


def tight(tmp: Path, sim: SimServer, n: int) -> str:
    s, out, _ = run(tmp, sim, n, ["--deadline", "90s"])
    live, batch, live_usd, batch_usd = lanes(out)
    all_live = live_usd + 2 * batch_usd
    return (
        f"--deadline 90s: {s['succeeded']}/{s['total']} in {s['makespan_s']:.1f} s (deadline met: "
        f"{s['deadline']['met']}), {live} live + {batch} batch lines, cost ${s['cost_usd']:.4f} = "
        f"{s['cost_usd'] / all_live:.2f}x all-live, {len(s['plans'])} plans"
    )


def roomy(tmp: Path, sim: SimServer, n: int) -> str:
    s, out, _ = run(tmp, sim, n, ["--deadline", "10m"])
    live, batch, _, _ = lanes(out)
    return (
        f"--deadline 10m: {s['succeeded']}/{s['total']} in {s['makespan_s']:.1f} s, {batch / n:.0%} at the batch "
        f"price ({live} live)"
    )


def broke(tmp: Path, sim: SimServer, n: int) -> str:
    s, _, started = run(tmp, sim, n, ["--deadline", "30s", "--budget", "0.01"])
    said = next((p for p in s["plans"] if not p["feasible"]), None)
    when = f"{said['at'] - started:.1f} s after the start" if said else "never"
    return f"--deadline 30s --budget 0.01: said it cannot {when}; spent ${s['cost_usd']:.4f}, {s['succeeded']} done"


SCENARIOS = {"tight": tight, "roomy": roomy, "broke": broke}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False
    )
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    args = parser.parse_args()
    sim = SimServer(SimConfig(latency_ms=200, latency_sigma=0.1, rpm=600, batch_seconds=20)).start(mode="process")
    try:
        for name in args.scenarios.split(","):
            with tempfile.TemporaryDirectory() as tmp:
                print(SCENARIOS[name](Path(tmp), sim, args.tasks), flush=True)
    finally:
        sim.stop()


if __name__ == "__main__":
    main()
