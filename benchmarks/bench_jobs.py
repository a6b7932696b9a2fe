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
  run          a whole headless run of a Batch JSONL job of 100,000 and 1,000,000 short prompts
               (`swarm-tui run JOB --headless`, the embedded simulator at 1 ms), a real process:
               the time to its first dispatch ("run started"), its peak RSS (VmHWM, polled), and
               the time from a real SIGINT (sent --stop-after seconds after the first dispatch)
               to the process's end, with its exit code. Goals: first dispatch of 1M
               within 15 s, peak RSS at 1M < 2x that at 100k, the stop within 10 s.
               Beside each, the same job as a table: a Parquet file of the same rows (id, text), its
               tasks `[tasks] from` it with the same prompt, model and max_tokens (a TOML job, so the
               bodies are byte for byte the JSONL's), run the same way right after it (interleaved,
               --repeat times). Goal: the Parquet job's first dispatch and peak RSS
               within 1.2x of the JSONL job's.
  refuse       the same jobs with one bad last line: the time to exit 2 and the peak RSS.

Usage:  python benchmarks/bench_jobs.py [--scenarios toml,size,percentiles] [--repeat 3] [--quick]
        python benchmarks/bench_jobs.py --scenarios run,refuse [--sizes 100000,1000000] [--stop-after 20]
        python benchmarks/bench_jobs.py --scenarios run --sizes 1000000 --repeat 2   (JSONL vs Parquet)
Each figure is the range over --repeat runs (min-max); ratios are against the baseline
measured in the same run. Absolute numbers depend on the machine (and its other load: check
`ps aux` first).
"""

from __future__ import annotations

import argparse
import bisect
import json
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from pathlib import Path

from swarm_tui.core.errors import InputError
from swarm_tui.engine.stats import SortedLatencies, nearest_rank
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


# --------------------------------------------------------------------------- run, refuse


def hwm_mb(pid: int) -> float | None:
    """The process's peak RSS so far (VmHWM), None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    match = re.search(r"VmHWM:\s+(\d+) kB", text)
    return int(match.group(1)) / 1024 if match else None


def watch_run(args: list[str], *, stop_after: float | None) -> dict:
    """`swarm-tui ARGS` in a real process: when its log says "run started", its peak RSS (polled
    until it ends), and, with `stop_after`, a SIGINT that many seconds after the first dispatch
    and how long the process took to end after it."""
    started = time.monotonic()
    child = subprocess.Popen(
        [sys.executable, "-m", "swarm_tui", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    seen: dict[str, float] = {}
    tail: list[str] = []

    def read() -> None:
        assert child.stderr is not None
        for line in child.stderr:
            tail[:] = [*tail[-20:], line.rstrip()]
            if "run started" in line and "dispatch" not in seen:
                seen["dispatch"] = time.monotonic()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    peak = 0.0
    signalled = None
    while child.poll() is None:
        peak = max(peak, hwm_mb(child.pid) or 0.0)
        if stop_after is not None and signalled is None and "dispatch" in seen:
            if time.monotonic() - seen["dispatch"] >= stop_after:
                signalled = time.monotonic()
                child.send_signal(signal.SIGINT)
        time.sleep(0.1)
    ended = time.monotonic()
    reader.join(5)
    return {
        "rc": child.returncode,
        "first_dispatch_s": seen["dispatch"] - started if "dispatch" in seen else None,
        "peak_mb": peak,
        "stop_s": ended - signalled if signalled is not None else None,
        "exit_s": ended - started,
        "tail": tail,
    }


def write_short_jsonl(path: Path, n: int, *, bad_last: bool = False) -> None:
    """A Batch JSONL job of short prompts (the issue's 1M-task job: 250 bytes a line)."""
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            body = {
                "model": "sim-1",
                "max_tokens": 16,
                "messages": [{"role": "user", "content": f"Task {i}: one word."}],
            }
            f.write(
                json.dumps({"custom_id": f"t-{i:07d}", "method": "POST", "url": "/v1/chat/completions", "body": body})
            )
            f.write("\n")
        if bad_last:
            f.write(json.dumps({"custom_id": "bad", "body": {"model": "sim-1", "messages": "not a list"}}) + "\n")


def write_short_parquet(path: Path, n: int) -> Path:
    """The rows of `write_short_jsonl`'s job as a table (id, text), and the TOML job that makes
    them the same requests (the same prompt, model and max_tokens); returns the TOML job."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    ids = pa.array([f"t-{i:07d}" for i in range(n)])
    texts = pa.array([f"Task {i}: one word." for i in range(n)])
    pq.write_table(pa.table({"id": ids, "text": texts}), path)
    job = path.with_suffix(".toml")
    job.write_text(
        f'name = "{path.stem}"\nmodel = "sim-1"\n[request]\nmax_tokens = 16\n'
        f'[tasks]\nfrom = "{path.name}"\nprompt = "{{text}}"\nid = "{{id}}"\n'
    )
    return job


def bench_run(sizes: list[int], tmp: Path, stop_after: float, scenarios: list[str], repeat: int = 1) -> None:
    rows, refusals = [], []
    peaks: dict[int, float] = {}
    measured: dict[tuple[str, int], list[dict]] = {}
    for n in sizes:
        if "run" in scenarios:
            jobs = {"jsonl": tmp / f"short-{n}.jsonl", "parquet": write_short_parquet(tmp / f"short-{n}.parquet", n)}
            write_short_jsonl(jobs["jsonl"], n)
            for _ in range(repeat):
                for kind, job in jobs.items():  # interleaved: a slow spell of the machine hits both
                    got = watch_run(
                        ["run", str(job), "--headless", "--sim-latency-ms", "1", "--log-every", "5"]
                        + ["--out", str(tmp / f"run-{n}")],
                        stop_after=stop_after,
                    )
                    measured.setdefault((kind, n), []).append(got)
                    if kind == "jsonl":
                        peaks[n] = got["peak_mb"]
                    done = next((line for line in reversed(got["tail"]) if "succeeded" in line), "?")
                    fmt = "{:.1f}".format
                    data = job.with_suffix(".parquet") if kind == "parquet" else job
                    rows.append(
                        [
                            f"{n:,} tasks, {kind}",
                            f"{data.stat().st_size / 2**20:.0f} MB",
                            "-" if got["first_dispatch_s"] is None else fmt(got["first_dispatch_s"]),
                            f"{got['peak_mb']:.0f}",
                            "-" if got["stop_s"] is None else fmt(got["stop_s"]),
                            str(got["rc"]),
                            done.split(" in ")[0],
                        ]
                    )
                    shutil.rmtree(tmp / f"run-{n}", ignore_errors=True)
            for path in (*jobs.values(), tmp / f"short-{n}.parquet"):
                path.unlink()
        if "refuse" in scenarios:
            bad = tmp / f"bad-{n}.jsonl"
            write_short_jsonl(bad, n, bad_last=True)
            got = watch_run(["run", str(bad), "--headless", "--out", str(tmp / f"bad-{n}")], stop_after=None)
            refusals.append(
                [f"{n:,} tasks + 1 bad line", f"{got['exit_s']:.1f}", f"{got['peak_mb']:.0f}", str(got["rc"])]
            )
            bad.unlink()
    if rows:
        table(
            f"Headless runs (one each; embedded simulator, 1 ms), SIGINT {stop_after:g} s after the first dispatch",
            ["job", "file", "first dispatch s", "peak RSS MB", "stop s", "exit", "at the stop"],
            rows,
        )
        if len(peaks) >= 2:
            small, big = min(peaks), max(peaks)
            print(f"  peak RSS {big:,} / {small:,} tasks: {peaks[big] / peaks[small]:.2f}x")
        for n in sizes:
            jsonl, parquet = measured.get(("jsonl", n)), measured.get(("parquet", n))
            if not jsonl or not parquet:
                continue
            first = [p["first_dispatch_s"] / j["first_dispatch_s"] for j, p in zip(jsonl, parquet, strict=True)]
            peak = [p["peak_mb"] / j["peak_mb"] for j, p in zip(jsonl, parquet, strict=True)]
            print(
                f"  Parquet / JSONL at {n:,} tasks: first dispatch {span(first, '{:.2f}x')}, "
                f"peak RSS {span(peak, '{:.2f}x')} (goal: within 1.2x)"
            )
    if refusals:
        table("A bad last line: refused (exit 2; one run each)", ["job", "exit s", "peak RSS MB", "exit"], refusals)


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
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False
    )
    parser.add_argument("--scenarios", default="toml,size,percentiles")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, one run (a smoke run)")
    parser.add_argument("--sizes", default=None, help="run, refuse: task counts (default 100000,1000000)")
    parser.add_argument("--stop-after", type=float, default=20.0, help="run: seconds after the first dispatch")
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
        if "run" in chosen or "refuse" in chosen:
            default = "10000,100000" if args.quick else "100000,1000000"
            sizes = [int(n) for n in (args.sizes or default).split(",")]
            bench_run(sizes, Path(tmp), args.stop_after, chosen, repeat=repeat)
    print(f"\n(python {sys.version.split()[0]}; each figure is min-max over {repeat} run(s))")


if __name__ == "__main__":
    main()
