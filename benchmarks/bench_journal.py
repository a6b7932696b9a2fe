"""What journaling an answer costs: `Journal.append` (the one write path) against
`record_success` as it was before it, answers per second on a real SQLite journal (WAL,
`synchronous=NORMAL`, as a run writes it).

Cases, each over the same answers (~1 KB chat completions kept as bytes, one task each):

  before          the journal as of --before (git show REV:swarm_tui/journal.py, loaded beside
                  this one): record_success(attempt, answer, [TaskSucceeded])
  after-record    today's record_success: the same call, now a wrapper over the projections
  after-append    append([TaskSucceeded(attempt, content, response=answer)]): what the engine
                  will call

each through one transaction per answer ("alone") and through group commit (`--group` answers
in one `transaction()`, as the engine commits the answers of one turn of its loop).

Scenario `commits` (what a commit costs the engine's loop, which waits for it): --commits
commits of --per-commit answers each into one new journal through `append`, each commit's wall
time (`time.perf_counter`: a checkpoint waits for the disk, which CPU time would not see). A
commit that crosses SQLite's automatic checkpoint threshold (1,000 pages of WAL) copies the WAL
into the database and syncs both, inside that commit; such commits are told apart by the WAL's
header, which the next commit rewrites (its checkpoint sequence number goes up) when it
restarts the WAL from the top. Printed: percentiles of every commit, of the commits without a
checkpoint, of those with one, and the WAL's size at the end (bounded by the checkpoints).

Usage:  python benchmarks/bench_journal.py [--scenarios rate,commits] [--answers 4000] [--group 50]
                                           [--repeat 5] [--before REV] [--commits 20000] [--per-commit 1]
Figures of `rate`: answers per second of this process's CPU time (`time.process_time`: a machine
busy with other work slows it far less than the wall clock), the best of --repeat rounds, the
cases interleaved round by round; `xN` is the ratio to `before` in the same run. They depend on
the machine and its disk (commits do not wait for the disk: WAL with `synchronous=NORMAL`; a
checkpoint does).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from swarm_tui.core.events import Attempt, TaskSucceeded
from swarm_tui.core.task import Task
from swarm_tui.core.usage import Usage
from swarm_tui.journal import Journal

from bench_answers import typical_answer  # the same ~1 KB chat completion

ROOT = Path(__file__).resolve().parent.parent
BEFORE = "c966e52"
"""The commit before the journal became a package (the first step: `core/`)."""


def journal_before(rev: str) -> type:
    """The `Journal` class of swarm_tui/journal.py at `rev`, as a module of this package (its
    relative imports resolve here; `strict_text` moved from providers.answer to strict_json)."""
    source = subprocess.run(
        ["git", "show", f"{rev}:swarm_tui/journal.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    source = source.replace("from .providers.answer import strict_text", "from .strict_json import strict_text")
    path = Path(tempfile.mkdtemp()) / "journal_before.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("swarm_tui.journal_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.Journal


def answers(count: int) -> list[tuple[Attempt, bytes, str]]:
    answer = typical_answer()
    out = []
    for i in range(count):
        attempt = Attempt(i, 1, "sim", 1000.0 + i, 850.0, "ok", status=200, request_id=f"req-{i}",
                          usage=Usage(120, 180), cost_usd=0.0004)  # fmt: skip
        out.append((attempt, answer, "Here is a typical answer"))
    return out


Write = Callable[[object, Attempt, bytes, str], None]


def record(journal, attempt: Attempt, answer: bytes, content: str) -> None:
    journal.records.record_success(attempt, answer, [TaskSucceeded(attempt, content)])


def append(journal, attempt: Attempt, answer: bytes, content: str) -> None:
    journal.writer.append([TaskSucceeded(attempt, content, response=answer)])


def one_round(journal_class: type, write: Write, work: list, group: int, where: Path) -> float:
    """Answers per CPU second journaling `work` into a new journal (`group` > 1: that many a transaction)."""
    tasks = [Task(a.index, f"t{a.index}", {"model": "m", "messages": []}) for a, _, _ in work]
    journal = journal_class.create(where, tasks, {"plan": {}, "job": {}})
    journal.begin_session()
    try:
        start = time.process_time()
        if group <= 1:
            for attempt, answer, content in work:
                write(journal, attempt, answer, content)
        else:
            for at in range(0, len(work), group):
                with journal.writer.transaction():
                    for attempt, answer, content in work[at : at + group]:
                        write(journal, attempt, answer, content)
        elapsed = time.process_time() - start
        assert journal.queries.counts().get("succeeded") == len(work)
    finally:
        journal.close()
    return len(work) / elapsed


def wal_checkpoints(wal: Path) -> int:
    """The WAL header's checkpoint sequence number (bytes 12-15, big-endian): it goes up each
    time a writer restarts the WAL after a checkpoint copied all of it into the database."""
    with wal.open("rb") as fh:
        header = fh.read(16)
    return int.from_bytes(header[12:16], "big") if len(header) == 16 else 0


def commit_latencies(commits: int, per_commit: int, where: Path) -> tuple[list[float], set[int], int]:
    """(each commit's wall ms, the commits that ran a checkpoint, the WAL's bytes at the end)."""
    work = answers(commits * per_commit)
    tasks = [Task(a.index, f"t{a.index}", {"model": "m", "messages": []}) for a, _, _ in work]
    journal = Journal.create(where, tasks, {"plan": {}, "job": {}})
    journal.begin_session()
    wal = journal.path.with_name(journal.path.name + "-wal")
    took: list[float] = []
    checkpointed: set[int] = set()
    try:
        seen = wal_checkpoints(wal)
        for at in range(0, len(work), per_commit):
            events = [TaskSucceeded(a, content, response=answer) for a, answer, content in work[at : at + per_commit]]
            start = time.perf_counter()
            journal.writer.append(events)
            took.append((time.perf_counter() - start) * 1000)
            now = wal_checkpoints(wal)
            if now != seen and len(took) > 1:  # this commit restarted the WAL: the one before it checkpointed
                checkpointed.add(len(took) - 2)
            seen = now
        assert journal.queries.counts().get("succeeded") == len(work)
        wal_bytes = wal.stat().st_size
    finally:
        journal.close()
    return took, checkpointed, wal_bytes


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1)))]


def commits_scenario(commits: int, per_commit: int) -> None:
    took, checkpointed, wal_bytes = commit_latencies(commits, per_commit, Path(tempfile.mkdtemp(prefix="bench-wal-")))
    plain = [ms for i, ms in enumerate(took) if i not in checkpointed]
    with_checkpoint = [took[i] for i in sorted(checkpointed)]

    def spread(values: list[float]) -> str:
        if not values:
            return "-"
        return (
            f"p50 {quantile(values, 0.5):6.3f}  p99 {quantile(values, 0.99):6.3f}  "
            f"p99.9 {quantile(values, 0.999):6.3f}  max {max(values):7.3f} ms"
        )

    print(f"{len(took):,} commits of {per_commit} answer(s) through append; wall time of each commit")
    print(f"  every commit            {spread(took)}")
    print(f"  without a checkpoint    {spread(plain)}")
    if with_checkpoint:
        print(
            f"  with the checkpoint     {len(with_checkpoint)} commits  min {min(with_checkpoint):6.3f}  "
            f"median {statistics.median(with_checkpoint):6.3f}  max {max(with_checkpoint):7.3f} ms"
        )
    print(f"  WAL at the end          {wal_bytes / 2**20:.1f} MiB")


def rate_scenario(args: argparse.Namespace) -> None:
    old = journal_before(args.before)
    work = answers(args.answers)
    cases = {"before": (old, record), "after-record": (Journal, record), "after-append": (Journal, append)}
    best: dict[tuple[str, str], float] = {}
    scratch = Path(tempfile.mkdtemp(prefix="bench-journal-"))
    runs = 0
    for _ in range(args.repeat):
        for mode, group in (("alone", 1), ("group", args.group)):
            for name, (journal_class, write) in cases.items():
                runs += 1
                rate = one_round(journal_class, write, work, group, scratch / f"run{runs}")
                best[name, mode] = max(best.get((name, mode), 0.0), rate)
    print(f"{args.answers:,} answers of {len(work[0][1]):,} bytes; group commit of {args.group}; best of {args.repeat}")
    for mode in ("alone", "group"):
        base = best["before", mode]
        for name in cases:
            rate = best[name, mode]
            print(f"  {mode:<5} {name:<13} {rate:9,.0f} answers/s  {1e6 / rate:6.1f} us  x{rate / base:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default="rate,commits", help="rate, commits, or both (comma-separated)")
    parser.add_argument("--answers", type=int, default=4000)
    parser.add_argument("--group", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--before", default=BEFORE, help="the commit whose journal is 'before'")
    parser.add_argument("--commits", type=int, default=20000, help="commits of the `commits` scenario")
    parser.add_argument("--per-commit", type=int, default=1, help="answers in each of those commits")
    args = parser.parse_args()
    chosen = args.scenarios.split(",")
    unknown = set(chosen) - {"rate", "commits"}
    if unknown:
        parser.error(f"--scenarios: unknown {', '.join(sorted(unknown))} (rate, commits)")
    if "rate" in chosen:
        rate_scenario(args)
    if "commits" in chosen:
        commits_scenario(args.commits, args.per_commit)


if __name__ == "__main__":
    main()
