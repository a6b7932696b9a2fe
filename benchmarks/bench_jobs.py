"""Jobs of any size: loading a job file, and keeping the run's latency percentiles.

Scenarios:

  toml         a TOML job of 500 / 1,000 / 2,000 `[[task]]` entries, valid and with one problem in
               its last entry (so every field's line is located): load time, time per entry
               (flat = linear), and the ratio to `tomllib.loads` of the same text (the floor).
  size         a Batch JSONL job (a shared system prompt + a task per line, as a prefix-cached job
               is written) and a TOML `count` + template job, 10,000 and 100,000 tasks, each
               loaded in a fresh subprocess: load time, peak RSS (VmHWM) and what loading added
               to the RSS the imports left, against a bare read (`json.loads` of each line, no checks)
               in a subprocess of its own. Goal: 100,000 tasks in < 5 s.
  percentiles  the cost of one more latency at 1,000 and 100,000 held: `SortedLatencies.add`
               (what `RunStats` keeps) against `bisect.insort` into a list (what it kept
               before), and the cost of reading p50/p95/p99.

Usage:  python benchmarks/bench_jobs.py [--scenarios toml,size,percentiles] [--repeat 3] [--quick]
Each figure is the range over --repeat runs (min-max); ratios are against the baseline
measured in the same run. Absolute numbers depend on the machine (and its other load: check
`ps aux` first).
"""

from __future__ import annotations

import argparse
import bisect
import json
import random
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

from swarm_tui.engine.stats import SortedLatencies, nearest_rank
from swarm_tui.errors import InputError
from swarm_tui.jobs import load_job

SYSTEM = (
    "You are a careful sub-agent of a 100,000-agent swarm. Answer in three sentences, cite the "
    "section you used, and say 'unknown' rather than guess. "
) * 3


def span(values: list[float], fmt: str = "{:.3f}") -> str:
    """`min-max` of repeated figures (one figure when they agree to the shown precision)."""
    low, high = fmt.format(min(values)), fmt.format(max(values))
    return low if low == high else f"{low}-{high}"


def table(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    print(f"\n{title}")
    for r in [header, ["-" * w for w in widths], *rows]:
        print(
            "  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        )


# --------------------------------------------------------------------------- toml


def toml_job(n: int, *, broken_last: bool) -> str:
    lines = [
        'name = "bench"',
        'model = "sim-1"',
        'system = "You are sub-agent #{agent} of swarm/{total}."',
        "[request]",
        "max_tokens = 64",
        "",
    ]
    for i in range(n):
        prompt = "prompt = 5" if broken_last and i == n - 1 else f'prompt = "task {i}: summarise section {i % 40}"'
        lines += ["[[task]]", f'id = "task-{i:05d}"', prompt, ""]
    return "\n".join(lines) + "\n"


def bench_toml(repeat: int, sizes: list[int], tmp: Path) -> None:
    rows = []
    for broken in (False, True):
        for n in sizes:
            path = tmp / f"tasks-{n}-{'bad' if broken else 'ok'}.toml"
            text = toml_job(n, broken_last=broken)
            path.write_text(text)
            loads, parses = [], []
            for _ in range(repeat):
                t0 = time.perf_counter()
                tomllib.loads(text)
                parses.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                try:
                    load_job(path)
                    outcome = "loaded"
                except InputError as exc:
                    [problem] = exc.problems
                    assert problem.line == 6 + 4 * n - 1, problem  # the last entry's prompt line
                    outcome = f"line {problem.line}"
                loads.append(time.perf_counter() - t0)
            rows.append(
                [
                    f"{n:,} [[task]]",
                    "1 problem" if broken else "valid",
                    outcome,
                    span(loads),
                    span([t / n * 1e6 for t in loads], "{:.1f}"),
                    span([a / b for a, b in zip(loads, parses, strict=True)], "{:.2f}x"),
                ]
            )
    table(
        "TOML jobs: load + validate (linear when us/entry is flat)",
        ["job", "kind", "outcome", "load s", "us/entry", "vs tomllib.loads"],
        rows,
    )


# --------------------------------------------------------------------------- size

CHILD = r"""
import json, re, sys, time
from pathlib import Path

def status_kb(key):  # VmRSS now, VmHWM the peak: both this process's own (ru_maxrss after
    # fork + exec still counts the forking parent's pages)
    return int(re.search(key + r":\s+(\d+) kB", Path("/proc/self/status").read_text()).group(1))

mode, path = sys.argv[1], Path(sys.argv[2])
from swarm_tui.jobs import load_job  # the imports' RSS is the floor
before = status_kb("VmRSS")
t0 = time.perf_counter()
if mode == "bare":
    with path.open("rb") as f:
        held = [json.loads(line) for line in f if line.strip()]
    n = len(held)
else:
    n = len(load_job(path).tasks)
elapsed = time.perf_counter() - t0
peak = status_kb("VmHWM")
print(json.dumps({"n": n, "s": elapsed, "peak_kb": peak, "before_kb": before}))
"""


def write_jsonl(path: Path, n: int) -> None:
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            body = {
                "model": "sim-1",
                "max_tokens": 256,
                "messages": [
                    {"role": "system", "content": SYSTEM},
                    {"role": "user", "content": f"Task #{i}: summarise section {i % 97} of the report."},
                ],
            }
            f.write(
                json.dumps(
                    {"custom_id": f"task-{i:06d}", "method": "POST", "url": "/v1/chat/completions", "body": body}
                )
                + "\n"
            )


def write_count_toml(path: Path, n: int) -> None:
    path.write_text(
        f'name = "bench"\nmodel = "sim-1"\ncontext = {json.dumps(SYSTEM)}\n'
        'system = "You are sub-agent #{agent} of swarm/{total}."\n[request]\nmax_tokens = 256\n'
        f'[tasks]\ncount = {n}\nprompt = "Task #{{agent}}: summarise your section."\n'
    )


def child(mode: str, path: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, mode, str(path)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def bench_size(repeat: int, sizes: list[int], tmp: Path) -> None:
    rows = []
    peaks: dict[tuple[str, int], list[float]] = {}
    for kind in ("jsonl", "toml"):
        for n in sizes:
            path = tmp / f"job-{n}.{kind}"
            (write_jsonl if kind == "jsonl" else write_count_toml)(path, n)
            runs = {"load": [], "bare": []}
            for _ in range(repeat):
                for mode in ("load", "bare") if kind == "jsonl" else ("load",):
                    got = child(mode, path)
                    assert got["n"] == n, got
                    runs[mode].append(got)
            load, bare = runs["load"], runs["bare"]
            peaks[(kind, n)] = [r["peak_kb"] / 1024 for r in load]
            what = "Batch JSONL" if kind == "jsonl" else "TOML count+template"
            rows.append(
                [
                    f"{what}, {n:,} tasks",
                    f"{path.stat().st_size / 2**20:.1f} MB",
                    span([r["s"] for r in load]),
                    span([r["s"] / n * 1e6 for r in load], "{:.1f}"),
                    span([r["peak_kb"] / 1024 for r in load], "{:.0f}"),
                    span([(r["peak_kb"] - r["before_kb"]) / 1024 for r in load], "{:.0f}"),
                    span([r["s"] for r in bare]) if bare else "-",
                    span([(r["peak_kb"] - r["before_kb"]) / 1024 for r in bare], "{:.0f}") if bare else "-",
                ]
            )
    table(
        "Big jobs, each load in a fresh process (RSS in MB: the peak, and +MB over the RSS after the imports)",
        ["job", "file", "load s", "us/task", "peak RSS", "+MB", "bare read s", "bare +MB"],
        rows,
    )
    if len(sizes) >= 2:
        small, big = sizes[0], sizes[-1]
        for kind in ("jsonl", "toml"):
            ratio = [b / s for s, b in zip(peaks[(kind, small)], peaks[(kind, big)], strict=True)]
            print(f"  peak RSS {big:,} / {small:,} tasks ({kind}): {span(ratio, '{:.2f}x')}")


# --------------------------------------------------------------------------- percentiles


def per_add_us(held: int, kind: str, rng: random.Random, batch: int = 2000) -> float:
    """us per added latency, adding `batch` more to a structure already holding `held`."""
    values = [rng.lognormvariate(5.0, 0.8) for _ in range(held)]
    more = [rng.lognormvariate(5.0, 0.8) for _ in range(batch)]
    if kind == "insort":
        flat = sorted(values)
        t0 = time.perf_counter()
        for v in more:
            bisect.insort(flat, v)
    else:
        kept = SortedLatencies()
        for v in values:
            kept.add(v)
        t0 = time.perf_counter()
        for v in more:
            kept.add(v)
    return (time.perf_counter() - t0) / batch * 1e6


def read_us(held: int, kind: str, rng: random.Random) -> float:
    values = sorted(rng.lognormvariate(5.0, 0.8) for _ in range(held))
    kept: list[float] | SortedLatencies = values if kind == "insort" else SortedLatencies(values)
    reads = 200
    t0 = time.perf_counter()
    for i in range(reads):
        if kind != "insort":
            kept.add(values[i])  # a read after an add: the cumulative sizes are recomputed
        else:
            bisect.insort(kept, values[i])  # type: ignore[arg-type]
        for q in (0.5, 0.95, 0.99):
            nearest_rank(kept, q)
    return (time.perf_counter() - t0) / reads * 1e6


def bench_percentiles(repeat: int, sizes: list[int]) -> None:
    rows = []
    for n in sizes:
        old = [per_add_us(n, "insort", random.Random(r)) for r in range(repeat)]
        new = [per_add_us(n, "sorted", random.Random(r)) for r in range(repeat)]
        old_read = [read_us(n, "insort", random.Random(r)) for r in range(repeat)]
        new_read = [read_us(n, "sorted", random.Random(r)) for r in range(repeat)]
        rows.append(
            [
                f"{n:,} held",
                span(old, "{:.2f}"),
                span(new, "{:.2f}"),
                span([a / b for a, b in zip(old, new, strict=True)], "{:.1f}x"),
                span(old_read, "{:.2f}"),
                span(new_read, "{:.2f}"),
            ]
        )
    table(
        "Latency percentiles, exact: us per observation (add one latency) and per add + p50/p95/p99 read",
        ["", "insort (old)", "SortedLatencies", "speed-up", "old add+read", "new add+read"],
        rows,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenarios", default="toml,size,percentiles")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, one run (a smoke run)")
    args = parser.parse_args()
    chosen = args.scenarios.split(",")
    repeat = 1 if args.quick else args.repeat
    with tempfile.TemporaryDirectory() as tmp:
        if "toml" in chosen:
            bench_toml(repeat, [100, 200, 400] if args.quick else [500, 1000, 2000], Path(tmp))
        if "size" in chosen:
            bench_size(repeat, [1000, 10_000] if args.quick else [10_000, 100_000], Path(tmp))
        if "percentiles" in chosen:
            bench_percentiles(repeat, [1000, 10_000] if args.quick else [1000, 100_000, 1_000_000])
    print(f"\n(python {sys.version.split()[0]}; each figure is min-max over {repeat} run(s))")


if __name__ == "__main__":
    main()
