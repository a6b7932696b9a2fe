"""What journaling an answer costs: `Journal.append` (the one write path, issue 26) against
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

Usage:  python benchmarks/bench_journal.py [--answers 4000] [--group 50] [--repeat 5] [--before REV]
Figures: answers per second of this process's CPU time (`time.process_time`: a machine busy
with other work slows it far less than the wall clock), the best of --repeat rounds, the cases
interleaved round by round; `xN` is the ratio to `before` in the same run. They depend on the
machine and its disk (commits do not wait for the disk: WAL with `synchronous=NORMAL`).
"""

from __future__ import annotations

import argparse
import importlib.util
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
"""The commit before the journal's package (issue 26, step 1: `core/`)."""


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
    journal.record_success(attempt, answer, [TaskSucceeded(attempt, content)])


def append(journal, attempt: Attempt, answer: bytes, content: str) -> None:
    journal.append([TaskSucceeded(attempt, content, response=answer)])


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
                with journal.transaction():
                    for attempt, answer, content in work[at : at + group]:
                        write(journal, attempt, answer, content)
        elapsed = time.process_time() - start
        assert journal.counts().get("succeeded") == len(work)
    finally:
        journal.close()
    return len(work) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=4000)
    parser.add_argument("--group", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--before", default=BEFORE, help="the commit whose journal is 'before'")
    args = parser.parse_args()
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


if __name__ == "__main__":
    main()
