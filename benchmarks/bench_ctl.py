"""What a script's `swarm-tui ctl RUN status --json` costs on a 100,000-task run in flight.

    python benchmarks/bench_ctl.py [--tasks 100000] [--done 10000] [--repeat 15]

A Batch JSONL job of `--tasks` tasks runs headless on the embedded simulator (`swarm-tui run ...
--headless`, a process of its own, as a user's would). Once `--done` of its tasks have answered,
while it goes on, each of these runs `--repeat` times as a whole process, one after the other:

* `python -c pass`: the interpreter's own start, the floor;
* `swarm-tui --version`: the full parser (every command's options, the engine they name);
* `swarm-tui ctl RUN status --json`: the status a script polls for;
* `swarm-tui ctl RUN limit N`: a command through the control queue, answered by the run
  (its wait for the driver's half-second poll included).

Printed per command: wall time p50 / p90 / max (what a script waits) and the process's CPU time
p50 (user + system, from the children's rusage: what the machine's load does not inflate), and the
modules `ctl status` imported (`-X importtime`). The run is stopped (SIGTERM) at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def write_job(path: Path, tasks: int) -> None:
    with path.open("w", encoding="utf-8") as out:
        for i in range(tasks):
            body = {
                "model": "sim-1",
                "max_tokens": 64,
                "messages": [{"role": "user", "content": f"Say something short about item {i}."}],
            }
            out.write(json.dumps({"custom_id": f"t-{i:06d}", "body": body}) + "\n")


def swarm(*args: str) -> list[str]:
    return [sys.executable, "-m", "swarm_tui", *args]


def timed(argv: list[str], repeat: int) -> tuple[list[float], list[float], str]:
    """Wall and CPU seconds of each run of `argv` as a whole process, and its last stdout."""
    walls, cpus, out = [], [], ""
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)}: exit {done.returncode}\n{done.stderr}")
        out = done.stdout
    return walls, cpus, out


def spread(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return (
        f"p50 {statistics.median(ordered) * 1000:6.0f} ms  p90 {p90 * 1000:6.0f} ms  max {ordered[-1] * 1000:6.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False
    )
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--done", type=int, default=10_000, help="measure once this many have answered")
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        job, run_dir = where / "big.jsonl", where / "run"
        write_job(job, args.tasks)
        env = {**os.environ, "SWARM_TUI_CONFIG": str(where / "config.toml")}
        driver = subprocess.Popen(
            swarm(
                "run",
                str(job),
                "--headless",
                "--out",
                str(run_dir),
                "--sim-latency-ms",
                "200",
                "--sim-error-rate",
                "0.01",
                "--concurrency",
                "50",
            ),  # fmt: skip
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        try:
            status: dict = {}
            while status.get("done", 0) < args.done:
                if driver.poll() is not None:
                    raise SystemExit(f"the run ended early (exit {driver.returncode})")
                time.sleep(1.0)
                if (run_dir / "journal.sqlite").exists():
                    probe = subprocess.run(
                        swarm("ctl", str(run_dir), "status", "--json"), capture_output=True, text=True
                    )
                    status = json.loads(probe.stdout) if probe.returncode == 0 else {}
            print(f"a run of {args.tasks:,} tasks in flight, {status['done']:,} done, {status['state']}")
            cases = [
                ("python -c pass", [sys.executable, "-c", "pass"]),
                ("swarm-tui --version", swarm("--version")),
                ("ctl RUN status --json", swarm("ctl", str(run_dir), "status", "--json")),
                ("ctl RUN limit 40", swarm("ctl", str(run_dir), "limit", "40")),
            ]
            last = ""
            for name, argv in cases:
                walls, cpus, out = timed(argv, args.repeat)
                cpu = statistics.median(cpus) * 1000
                print(f"{name:24} wall {spread(walls)}   cpu p50 {cpu:5.0f} ms")
                if name.startswith("ctl RUN status"):
                    last = out
            seen = json.loads(last)
            print(f"last status: state {seen['state']}, {seen['done']:,}/{seen['total']:,} done, "
                  f"{seen['requests_per_s']} req/s, ETA {seen['eta_s']} s")  # fmt: skip
            imported = subprocess.run(
                [sys.executable, "-X", "importtime", "-m", "swarm_tui", "ctl", str(run_dir), "status", "--json"],
                capture_output=True,
                text=True,
            ).stderr
            names = [line.split("|")[-1].strip() for line in imported.splitlines() if line.startswith("import time:")]
            ours = sorted({n.split(".")[1] if n.count(".") else n for n in names if n.startswith("swarm_tui")})
            heavy = [n for n in ("openai", "textual", "aiohttp", "httpx", "swarm_tui.engine") if n in names]
            print(f"ctl status imports {len(names)} modules; of swarm_tui: {', '.join(ours)}; heavy: {heavy or 'none'}")
        finally:
            driver.send_signal(signal.SIGTERM)
            try:
                driver.wait(120)
            except subprocess.TimeoutExpired:
                driver.kill()


if __name__ == "__main__":
    main()
