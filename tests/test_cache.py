"""The response cache (`--cache`): real runs (the CLI in subprocesses) against the
simulator on loopback, which counts every request it answers; the cache in a temporary directory
(never the developer's own: XDG_CACHE_HOME points into tmp_path too)."""

from __future__ import annotations

import json
import os
import resource
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from swarm_tui.cache import CacheEntry, CacheMode, CacheSettings, ResponseCache, request_key

from tests.conftest import kill_when, read_jsonl, run_cli, start_cli, write_batch
from tests.test_crash_resume import succeeded_indices


@pytest.fixture(autouse=True)
def private_cache_home(tmp_path, monkeypatch):
    """No test reads or writes the real ~/.cache: the default directory is in tmp_path too."""
    home = tmp_path / "xdg-cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    return home


def cached_run(job: Path, base_url: str, out: Path, cache_dir: Path, *extra: str, mode: str | None = None):
    cache = ["--cache"] if mode is None else ["--cache", mode]
    return run_cli(
        "run",
        str(job),
        "--headless",
        "--base-url",
        base_url,
        "--out",
        str(out),
        *cache,
        "--cache-dir",
        str(cache_dir),
        *extra,
    )


def results_by_id(run_dir: Path) -> dict[str, dict]:
    return {line["custom_id"]: line for line in read_jsonl(run_dir / "results.jsonl")}


def cache_rows(cache_dir: Path) -> int:
    db = sqlite3.connect(cache_dir / "responses.sqlite3")
    try:
        return db.execute("SELECT count(*) FROM answers").fetchone()[0]
    finally:
        db.close()


def test_a_job_run_twice_sends_nothing_the_second_time_with_the_same_results(tmp_path, sim):
    prompts = [f"cached question {i}" for i in range(1000)]
    job = write_batch(tmp_path / "job.jsonl", prompts)
    cache_dir = tmp_path / "cache"
    first = cached_run(job, sim.base_url, tmp_path / "one", cache_dir, "--concurrency", "100")
    assert first.returncode == 0, first.stderr
    assert sim.stats()["requests"] == 1000
    assert cache_rows(cache_dir) == 1000

    started = time.monotonic()
    second = cached_run(job, sim.base_url, tmp_path / "two", cache_dir)
    took = time.monotonic() - started
    assert second.returncode == 0, second.stderr
    assert sim.stats()["requests"] == 1000, "the second run sent a request"
    one, two = results_by_id(tmp_path / "one"), results_by_id(tmp_path / "two")
    assert len(two) == 1000 and one == two  # the same bytes, request ids included
    summary = json.loads((tmp_path / "two" / "summary.json").read_text())
    assert summary["succeeded"] == 1000 and summary["requests"]["sent"] == 0
    assert summary["cache"]["hits"] == 1000 and summary["cost_usd"] in (0, None)
    assert "cache 1,000 hits" in second.stderr
    print(f"second run of 1,000 cached tasks: {took:.2f} s (the process included)")


def test_twenty_changed_prompts_send_exactly_twenty(tmp_path, sim):
    prompts = [f"stable question {i}" for i in range(200)]
    job = write_batch(tmp_path / "job.jsonl", prompts)
    cache_dir = tmp_path / "cache"
    assert cached_run(job, sim.base_url, tmp_path / "one", cache_dir).returncode == 0
    changed = list(prompts)
    for i in range(0, 200, 10):
        changed[i] = f"edited question {i}"
    job2 = write_batch(tmp_path / "job2.jsonl", changed)
    sim.reset()
    second = cached_run(job2, sim.base_url, tmp_path / "two", cache_dir)
    assert second.returncode == 0, second.stderr
    assert sim.stats()["requests"] == 20
    assert set(sim.stats()["successes_by_prompt"]) == {f"edited question {i}" for i in range(0, 200, 10)}
    answers = results_by_id(tmp_path / "two")
    assert all(
        answers[f"task-{i:04d}"]["response"]["body"]["choices"][0]["message"]["content"].startswith(
            f"Sim answer to: {changed[i]}"
        )
        for i in range(200)
    )
    assert json.loads((tmp_path / "two" / "summary.json").read_text())["cache"]["hits"] == 180


def test_a_changed_generation_parameter_is_another_request(tmp_path, sim):
    prompts = [f"q {i}" for i in range(30)]
    cache_dir = tmp_path / "cache"
    first = write_batch(tmp_path / "a.jsonl", prompts)
    assert cached_run(first, sim.base_url, tmp_path / "a", cache_dir).returncode == 0
    sim.reset()
    other = write_batch(tmp_path / "b.jsonl", prompts, max_tokens=65)
    assert cached_run(other, sim.base_url, tmp_path / "b", cache_dir).returncode == 0
    assert sim.stats()["requests"] == 30


def test_identical_requests_of_one_run_are_sent_once(tmp_path, sim):
    prompts = [f"duplicate {i % 25}" for i in range(100)]
    job = write_batch(tmp_path / "job.jsonl", prompts)
    result = cached_run(job, sim.base_url, tmp_path / "run", tmp_path / "cache", "--concurrency", "50")
    assert result.returncode == 0, result.stderr
    assert sim.stats()["requests"] == 25
    answers = results_by_id(tmp_path / "run")
    assert len(answers) == 100
    assert all(
        answers[f"task-{i:04d}"]["response"]["body"]["choices"][0]["message"]["content"].startswith(
            f"Sim answer to: duplicate {i % 25}"
        )
        for i in range(100)
    )


def test_cache_read_on_an_empty_cache_sends_everything_and_writes_nothing(tmp_path, sim):
    job = write_batch(tmp_path / "job.jsonl", [f"read only {i}" for i in range(50)])
    cache_dir = tmp_path / "cache"
    result = cached_run(job, sim.base_url, tmp_path / "run", cache_dir, mode="read")
    assert result.returncode == 0, result.stderr
    assert sim.stats()["requests"] == 50
    assert not cache_dir.exists(), "a replay-only run created a cache"
    ResponseCache(cache_dir, CacheMode.READ_WRITE).close()  # an empty cache: read, still nothing written
    result = cached_run(job, sim.base_url, tmp_path / "run2", cache_dir, mode="read")
    assert result.returncode == 0 and sim.stats()["requests"] == 100
    assert cache_rows(cache_dir) == 0
    again = cached_run(job, sim.base_url, tmp_path / "again", cache_dir, mode="read")
    assert again.returncode == 0 and sim.stats()["requests"] == 150  # nothing was kept to replay


def test_cache_write_keeps_answers_and_replays_none(tmp_path, sim):
    job = write_batch(tmp_path / "job.jsonl", [f"write only {i}" for i in range(20)])
    cache_dir = tmp_path / "cache"
    assert cached_run(job, sim.base_url, tmp_path / "one", cache_dir).returncode == 0
    assert cached_run(job, sim.base_url, tmp_path / "two", cache_dir, mode="write").returncode == 0
    assert sim.stats()["requests"] == 40 and cache_rows(cache_dir) == 20


def test_without_cache_nothing_is_read_or_written(tmp_path, sim, private_cache_home):
    job = write_batch(tmp_path / "job.jsonl", [f"plain {i}" for i in range(20)])
    for name in ("one", "two"):
        result = run_cli("run", str(job), "--headless", "--base-url", sim.base_url, "--out", str(tmp_path / name))
        assert result.returncode == 0, result.stderr
    assert sim.stats()["requests"] == 40
    assert not private_cache_home.exists(), "a run without --cache created a cache"
    assert "cache" not in json.loads((tmp_path / "two" / "summary.json").read_text())


def test_errors_are_never_cached(tmp_path, sim):
    job = write_batch(tmp_path / "job.jsonl", ["fine", "broken [[sim:500]]"])
    cache_dir = tmp_path / "cache"
    first = cached_run(job, sim.base_url, tmp_path / "one", cache_dir, "--max-attempts", "2")
    assert first.returncode == 1, first.stderr
    assert cache_rows(cache_dir) == 1
    sim.reset()
    second = cached_run(job, sim.base_url, tmp_path / "two", cache_dir, "--max-attempts", "2")
    assert second.returncode == 1
    assert sim.stats()["requests"] == 2  # the failure is sent again (twice), the answer replayed
    assert len(read_jsonl(tmp_path / "two" / "errors.jsonl")) == 1


def test_an_answer_the_jobs_validator_refused_is_never_cached(tmp_path, sim):
    """Workers that must answer JSON: the prose answers the validator refused are not kept (the
    task fails; the next run sends it again), the valid one is."""
    cache_dir = tmp_path / "cache"
    job = tmp_path / "strict.toml"
    job.write_text(
        'name = "strict"\nmodel = "sim-1"\n\n[request]\nmax_tokens = 64\n\n[workers]\njson = true\n\n'
        '[[task]]\nprompt = "prose always [[sim:prose]]"\n\n[[task]]\nprompt = "fine"\n',
        encoding="utf-8",
    )
    first = cached_run(job, sim.base_url, tmp_path / "a", cache_dir, "--max-attempts", "1")
    assert first.returncode == 1, first.stderr
    assert cache_rows(cache_dir) == 1
    sim.reset()
    second = cached_run(job, sim.base_url, tmp_path / "b", cache_dir, "--max-attempts", "1")
    assert second.returncode == 1, second.stderr
    sent = sim.stats()["successes_by_prompt"]
    assert "fine" not in sent, "the valid answer was not replayed"
    assert sent.get("prose always [[sim:prose]]") == 1, "the refused answer was not sent again"


def test_two_processes_share_one_cache_at_once(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=5.0)
    cache_dir = tmp_path / "cache"
    left = [f"shared {i}" for i in range(0, 600)]
    right = [f"shared {i}" for i in range(300, 900)]
    jobs = [write_batch(tmp_path / "left.jsonl", left), write_batch(tmp_path / "right.jsonl", right)]
    children = [
        start_cli(
            "run",
            str(job),
            "--headless",
            "--base-url",
            sim.base_url,
            "--out",
            str(tmp_path / f"run{n}"),
            "--cache",
            "--cache-dir",
            str(cache_dir),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n, job in enumerate(jobs)
    ]
    for child in children:
        _, err = child.communicate(timeout=110)
        assert child.returncode == 0, err
    for n, prompts in enumerate((left, right)):
        answers = results_by_id(tmp_path / f"run{n}")
        assert len(answers) == 600
        assert all(
            answers[f"task-{i:04d}"]["response"]["body"]["choices"][0]["message"]["content"].startswith(
                f"Sim answer to: {p}"
            )
            for i, p in enumerate(prompts)
        )
    db = sqlite3.connect(cache_dir / "responses.sqlite3")
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    db.close()
    assert cache_rows(cache_dir) == 900
    before = sim.stats()["requests"]
    union = write_batch(tmp_path / "union.jsonl", [f"shared {i}" for i in range(900)])
    third = cached_run(union, sim.base_url, tmp_path / "union", cache_dir, mode="read")
    assert third.returncode == 0, third.stderr
    assert sim.stats()["requests"] == before, "what the two processes kept is not all in the cache"


OPEN_AT_ONCE = """
import sys, time
from pathlib import Path
from swarm_tui.cache import ResponseCache
start, count, root = float(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
for k in range(count):
    while time.time() < start + k * 0.15:  # both processes open cache k at the same moment
        pass
    problems = []
    ResponseCache(root / str(k), on_problem=problems.append).close()
    print(problems[0] if problems else "ok", flush=True)
"""


def test_two_processes_that_create_the_cache_at_the_same_moment_both_use_it(tmp_path):
    """A new cache file opened by two runs at once: SQLite said "database is locked" to one of them
    at once, without waiting (the file not yet in WAL mode), and that run went on uncached: its
    answers were never kept (a full CI run lost 300 of 900 so). 20 new caches, two processes each."""
    count, start = 20, time.time() + 1.5  # the processes' start-up first
    command = [sys.executable, "-c", OPEN_AT_ONCE, str(start), str(count), str(tmp_path)]
    children = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    said = [child.communicate(timeout=60)[0].splitlines() for child in children]
    problems = [line for lines in said for line in lines if line != "ok"]
    assert all(len(lines) == count for lines in said), said
    assert not problems, f"{len(problems)} of {2 * count} opened uncached: {problems[0]}"


def test_resume_after_sigkill_sends_no_success_again(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=60, latency_sigma=0.4, seed=5)
    prompts = [f"killed {i}" for i in range(300)]
    job = write_batch(tmp_path / "job.jsonl", prompts)
    run_dir, cache_dir = tmp_path / "run", tmp_path / "cache"
    child = start_cli(
        "run",
        str(job),
        "--headless",
        "--base-url",
        sim.base_url,
        "--out",
        str(run_dir),
        "--concurrency",
        "20",
        "--cache",
        "--cache-dir",
        str(cache_dir),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=os.environ.copy(),
    )
    kill_when(child, lambda: len(succeeded_indices(run_dir / "journal.sqlite")) >= 100, "100 answers journaled")
    done_before = succeeded_indices(run_dir / "journal.sqlite")
    sim.reset()
    resumed = run_cli("resume", str(run_dir), "--headless")
    assert resumed.returncode == 0, resumed.stderr
    resent = Counter(sim.stats()["successes_by_prompt"])
    assert not set(resent) & {prompts[i] for i in done_before}, "a journaled success was sent again"
    assert all(count == 1 for count in resent.values())
    assert len(results_by_id(run_dir)) == 300


def test_a_corrupt_cache_is_reported_once_and_the_run_goes_on_uncached(tmp_path, sim):
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    (cache_dir / "responses.sqlite3").write_bytes(b"this is not a database" * 500)
    job = write_batch(tmp_path / "job.jsonl", [f"corrupt {i}" for i in range(30)])
    result = cached_run(job, sim.base_url, tmp_path / "run", cache_dir)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("response cache") == 1, result.stderr
    assert "uncached" in result.stderr and "Traceback" not in result.stderr
    assert sim.stats()["requests"] == 30 and len(results_by_id(tmp_path / "run")) == 30
    assert (cache_dir / "responses.sqlite3").read_bytes() == b"this is not a database" * 500  # left as it was
    stats = run_cli("cache", "stats", "--cache-dir", str(cache_dir))
    assert stats.returncode == 2 and "responses.sqlite3" in stats.stderr


FILL_WITHOUT_CHECKPOINT = """
import os, signal, sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("PRAGMA journal_mode = WAL")
db.execute("PRAGMA wal_autocheckpoint = 0")
db.execute("BEGIN")
for i in range(400):
    db.execute("INSERT INTO answers (key, model, response, size, created_at, last_used_at) "
               "VALUES (?, 'm', ?, 8192, ?, ?)", (f"filler-{i}", b"x" * 8192, time.time(), time.time()))
db.execute("COMMIT")
os.kill(os.getpid(), signal.SIGKILL)  # the WAL stays as it is: whoever writes next appends past it
"""


def test_a_full_disk_while_writing_the_cache_never_fails_the_run(tmp_path, sim):
    """`ulimit -f`: the cache's WAL, left 3 MiB long by a killed writer, cannot grow past the 1 MiB
    limit; the run's own files (small) can. The run ends 0 with every answer; the cache's trouble
    is said once, and the file stays sound."""
    cache_dir = tmp_path / "cache"
    ResponseCache(cache_dir, CacheMode.READ_WRITE).close()
    filler = subprocess.run([sys.executable, "-c", FILL_WITHOUT_CHECKPOINT, str(cache_dir / "responses.sqlite3")])
    assert filler.returncode == -signal.SIGKILL
    limit = 1024 * 1024
    assert (cache_dir / "responses.sqlite3-wal").stat().st_size > 2 * limit
    # 40 tasks: the run's own journal (and its WAL) stays well under the limit; at 100 it grew past
    # 1 MiB now and then, and the run stopped on its own journal, not the cache
    job = write_batch(tmp_path / "job.jsonl", [f"full disk {i}" for i in range(40)])

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "swarm_tui",
            "run",
            str(job),
            "--headless",
            "--base-url",
            sim.base_url,
            "--out",
            str(tmp_path / "run"),
            "--cache",
            "--cache-dir",
            str(cache_dir),
        ],
        capture_output=True,
        text=True,
        timeout=110,
        preexec_fn=limited,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert len(results_by_id(tmp_path / "run")) == 40
    assert result.stderr.count("response cache") == 1, result.stderr
    assert "cannot be written" in result.stderr
    db = sqlite3.connect(cache_dir / "responses.sqlite3")
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert db.execute("SELECT count(*) FROM answers WHERE key LIKE 'filler-%'").fetchone() == (400,)
    db.close()


def test_cache_stats_clear_and_prune(tmp_path, sim):
    cache_dir = tmp_path / "cache"
    job = write_batch(tmp_path / "job.jsonl", [f"stats {i}" for i in range(10)])
    assert cached_run(job, sim.base_url, tmp_path / "one", cache_dir).returncode == 0
    assert cached_run(job, sim.base_url, tmp_path / "two", cache_dir).returncode == 0
    stats = run_cli("cache", "stats", "--json", "--cache-dir", str(cache_dir))
    assert stats.returncode == 0, stats.stderr
    figures = json.loads(stats.stdout)
    assert figures["entries"] == 10 and figures["hits"] == 10 and figures["lookups"] == 20
    assert figures["hit_rate"] == 0.5 and figures["models"][0]["model"] == "sim-1"
    pruned = run_cli("cache", "prune", "--cache-dir", str(cache_dir), "--cache-max-size", "1")
    assert pruned.returncode == 0 and "10 least recently used" in pruned.stdout, pruned.stdout
    assert cached_run(job, sim.base_url, tmp_path / "three", cache_dir).returncode == 0
    cleared = run_cli("cache", "clear", "--cache-dir", str(cache_dir))
    assert cleared.returncode == 0 and "removed 10" in cleared.stdout
    assert cache_rows(cache_dir) == 0


def test_an_expired_answer_is_not_replayed(tmp_path):
    now = [1_000_000.0]
    cache = ResponseCache(tmp_path, CacheMode.READ_WRITE, ttl_s=3600, clock=lambda: now[0])
    key = request_key("http://x/v1", "m", {"messages": [{"role": "user", "content": "hi"}]})
    cache.put(CacheEntry(key, "m", b'{"choices": []}', created_at=now[0]))
    cache.flush()
    assert key in cache.lookup([key])
    now[0] += 3601
    assert cache.lookup([key]) == {}
    assert cache.prune() == (1, 0)
    cache.close()


def test_the_key_holds_what_changes_the_answer_and_nothing_else():
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.7, "max_tokens": 9}
    key = request_key("http://x/v1", None, body)
    assert key == request_key(
        "http://x/v1/", None, {**body, "stream": True, "stream_options": {"a": 1}, "user": "u1", "metadata": {"k": "v"}}
    )
    assert key == request_key("http://x/v1", None, dict(reversed(list(body.items()))))
    for changed in (
        {"temperature": 0.8},
        {"seed": 1},
        {"max_tokens": 10},
        {"response_format": {"type": "json"}},
        {"tools": [{"type": "function"}]},
        {"model": "n"},
    ):
        assert request_key("http://x/v1", None, {**body, **changed}) != key, changed
    assert request_key("http://y/v1", None, body) != key


def test_a_cache_flag_without_a_job_file_before_it_reads_as_a_mode(tmp_path):
    result = run_cli("run", "--cache", "sometimes", "--headless")
    assert result.returncode == 2 and "--cache" in result.stderr


def test_a_bad_cache_table_in_a_toml_job_names_file_line_and_field(tmp_path, sim):
    job = tmp_path / "job.toml"
    job.write_text(
        'name = "x"\nmodel = "sim-1"\n[[task]]\nprompt = "a"\n[cache]\nmode = "sometimes"\nttl = "soon"\n',
        encoding="utf-8",
    )
    result = run_cli("run", str(job), "--headless", "--base-url", sim.base_url, "--out", str(tmp_path / "run"))
    assert result.returncode == 2, result.stderr
    assert f"{job}:6" in result.stderr and "cache.mode" in result.stderr
    assert f"{job}:7" in result.stderr and "cache.ttl" in result.stderr
    assert sim.stats()["requests"] == 0 and not (tmp_path / "run").exists()


def test_a_toml_jobs_cache_table_turns_the_cache_on(tmp_path, sim):
    cache_dir = tmp_path / "cache"
    job = tmp_path / "job.toml"
    job.write_text(
        f'name = "x"\nmodel = "sim-1"\n[tasks]\ncount = 2\nprompt = "task {{agent}}"\n\n[cache]\n'
        f'dir = "{cache_dir.name}"\nttl = "1d"\n',
        encoding="utf-8",
    )
    for name in ("one", "two"):
        result = run_cli("run", str(job), "--headless", "--base-url", sim.base_url, "--out", str(tmp_path / name))
        assert result.returncode == 0, result.stderr
    assert sim.stats()["requests"] == 2 and cache_rows(cache_dir) == 2


async def test_an_agent_run_again_with_the_same_tool_results_replays_its_steps(tmp_path, sim_factory):
    """Multi-step agents: each model call (a step that asked for tools, then the answer) is kept;
    run again, the tools run again (for real) and, their results being the same, every model call
    is replayed: the simulator sees none."""
    from dataclasses import replace as replaced

    from swarm_tui.engine import EngineSettings
    from swarm_tui.jobs import load_job
    from swarm_tui.providers.profile import ProviderProfile
    from swarm_tui.run.session import RunPlan, SwarmSession
    from swarm_tui.tools.spec import PythonToolSpec, ToolsSpec

    sim = sim_factory(latency_ms=2)
    tools = ToolsSpec(
        python=(PythonToolSpec("tests.agent_tools:lookup", where="tools.python[0]"),), max_steps=4, source="job.toml"
    )
    job = replaced(
        load_job(write_batch(tmp_path / "job.jsonl", [f"agent {i} [[sim:tools=2]]" for i in range(6)], max_tokens=256)),
        tools=tools,
    )
    settings = EngineSettings.of(concurrency=4)
    cache = CacheSettings(mode="readwrite", dir=str(tmp_path / "cache"))
    plan = RunPlan(ProviderProfile("custom", base_url=sim.base_url), settings, cache=cache)

    async def run(name: str) -> SwarmSession:
        session = SwarmSession.open_new(job, plan, tmp_path / name)
        try:
            await session.run()
        finally:
            await session.aclose()
        return session

    first = await run("one")
    assert first.engine.stats.succeeded == 6 and sim.stats()["tool_steps"] == 12
    sent = sim.stats()["requests"]
    assert sent == 18  # 6 agents x (2 steps + the answer)
    second = await run("two")
    assert second.engine.stats.succeeded == 6
    assert sim.stats()["requests"] == sent, "a model call of an agent was sent again"
    assert second.engine.stats.cache_hits == 18 and second.engine.stats.steps == 12
    assert results_by_id(tmp_path / "one") == results_by_id(tmp_path / "two")
    transcripts = [read_jsonl(tmp_path / name / "transcripts.jsonl") for name in ("one", "two")]
    assert [t["messages"] for t in transcripts[0]] == [t["messages"] for t in transcripts[1]]


def test_a_swarm_with_its_judge_run_again_sends_nothing(tmp_path, sim):
    """Planner, warm-up, workers, aggregator and the judge's verdicts: every call of the second run
    is a replay (the direct calls are looked up before admission, as the tasks are)."""
    from tests.conftest import REPO

    job = REPO / "sample_jobs" / "research-swarm.toml"
    cache_dir = tmp_path / "cache"
    judged = ("--judge", "self", "--judge-rate", "1")
    first = cached_run(job, sim.base_url, tmp_path / "one", cache_dir, *judged)
    assert first.returncode == 0, first.stderr
    sent = sim.stats()["requests"]
    assert sim.stats()["judge"]["requests"] > 0
    second = cached_run(job, sim.base_url, tmp_path / "two", cache_dir, *judged)
    assert second.returncode == 0, second.stderr
    assert sim.stats()["requests"] == sent, "a call of the swarm or its judge was sent again"
    assert (tmp_path / "one" / "aggregate.md").read_text() == (tmp_path / "two" / "aggregate.md").read_text()
    summaries = [json.loads((tmp_path / name / "summary.json").read_text()) for name in ("one", "two")]
    assert summaries[1]["cache"]["hits"] == sent and summaries[1]["requests"]["sent"] == 0
    assert summaries[1]["quality"]["judged"] == summaries[0]["quality"]["judged"] > 0
