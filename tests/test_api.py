"""The Python API (`swarm_tui.api`): the docs' few-line script runs as written; a run in this
process streams its events and is steered as the console's keys steer it; a detached run is
started with the flags that make the same request; a refused start leaves nothing behind."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys

import pytest
from swarm_tui import api
from swarm_tui.cli.main import build_parser
from swarm_tui.cli.request import run_request
from swarm_tui.core.errors import InputError
from swarm_tui.core.events import ConcurrencyChanged, RunFinished, RunPaused, RunResumed, TaskFailed, TaskSucceeded
from swarm_tui.journal import Journal

from tests.conftest import REPO, write_batch

DOCS = REPO / "docs"


def api_page_files() -> dict[str, str]:
    page = (DOCS / "guides" / "api.md").read_text(encoding="utf-8")
    return dict(re.findall(r'^```python title="([^"]+)"\n(.*?)^```$', page, flags=re.MULTILINE | re.DOTALL))


def test_the_api_pages_script_runs_as_written(tmp_path):
    files = api_page_files()
    assert list(files) == ["colours.py"], "the page shows its script"
    (tmp_path / "colours.py").write_text(files["colours.py"], encoding="utf-8")
    done = subprocess.run([sys.executable, "colours.py"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "20 answered, 0 failed (exit code 0)", lines[:3]
    assert [line.split()[0] for line in lines[1:]] == [f"prompt-{n:02}" for n in range(1, 21)]
    assert all("flag of country number" in line for line in lines[1:])
    run_dir = tmp_path / "runs" / "colours"
    assert (run_dir / "prompts.toml").is_file() and (run_dir / "summary.json").is_file()


async def test_a_run_in_this_process_streams_its_events_and_is_steered(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=80.0, latency_sigma=0.0)
    prompts = [f"task {i}" + (" [[sim:500]]" if i in (2, 5) else "") for i in range(30)]
    job = write_batch(tmp_path / "job.jsonl", prompts)
    seen: list[object] = []
    async with api.open_run(job, base_url=sim.base_url, out=tmp_path / "run", concurrency=3, max_attempts=1) as run:
        async for event in run:
            seen.append(event)
            if isinstance(event, TaskSucceeded) and sum(isinstance(e, TaskSucceeded) for e in seen) == 5:
                assert run.pause() == 0 and run.set_limit(2) == 2
                run.resume()
        outcome = await run.wait()
        assert (outcome.succeeded, outcome.failed, outcome.exit_code) == (28, 2, 1)
        assert sorted(r.custom_id for r in run.results("failed")) == ["task-0002", "task-0005"]
        assert run.status().failed_by_class == {"server_error": 2}
        assert run.retry_failed(error_class="server_error") == 2, "queued again, for a session to come"
    kinds = [type(e) for e in seen]
    assert kinds.index(RunPaused) < kinds.index(RunResumed) and kinds[-1] is RunFinished
    assert any(isinstance(e, ConcurrencyChanged) and e.reason == "api" and e.limit == 2 for e in seen)
    assert sum(isinstance(e, TaskFailed) for e in seen) == 2
    answers = api.RemoteRun(tmp_path / "run")
    try:
        page = answers.results("succeeded", 0, 100)
    finally:
        answers.close()
    assert page.total == 28 and page.results[0].answer and page.results[0].custom_id == "task-0000"


async def test_an_exception_in_the_block_aborts_the_run_and_leaves_it_resumable(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=200.0, latency_sigma=0.0)
    job = write_batch(tmp_path / "job.jsonl", [f"task {i}" for i in range(40)])
    with pytest.raises(RuntimeError, match="enough"):
        async with api.open_run(job, base_url=sim.base_url, out=tmp_path / "run", concurrency=2) as run:
            async for event in run:
                if isinstance(event, TaskSucceeded):
                    raise RuntimeError("enough")
    journal = Journal.open(tmp_path / "run", readonly=True)
    try:
        assert journal.history.run_ended() and journal.queries.counts().get("queued", 0) > 30
    finally:
        journal.close()


@pytest.mark.parametrize("how", ["abort", "raise"])
async def test_a_run_stopped_as_its_block_opens_sends_nothing(tmp_path, sim_factory, how):
    """The block's first line runs before the run's first step: the stop it asks for holds (the
    engine forgot it when it began, and the whole run went on)."""
    sim = sim_factory(latency_ms=200.0, latency_sigma=0.0)
    job = write_batch(tmp_path / "job.jsonl", [f"task {i}" for i in range(40)])
    with pytest.raises(RuntimeError, match="at once") if how == "raise" else contextlib.nullcontext():
        async with api.open_run(job, base_url=sim.base_url, out=tmp_path / "run") as run:
            if how == "raise":
                raise RuntimeError("at once")
            run.abort()
            outcome = await run.wait()
            assert (outcome.aborted, outcome.succeeded, outcome.exit_code) == (True, 0, 130)
    assert sim.stats()["requests"] == 0
    journal = Journal.open(tmp_path / "run", readonly=True)
    try:
        assert journal.history.run_ended() and journal.queries.counts().get("queued", 0) == 40
    finally:
        journal.close()


SETTINGS: api.RunSettings = {
    "api_key_env": "MY_KEY",
    "concurrency": 7,
    "max_attempts": 3,
    "timeout_s": 12.5,
    "rpm": 600,
    "tpm": 90000,
    "budget_usd": 1.25,
    "fail_on_error": 0.2,
    "lane": "batch",
    "stream": True,
    "sim_latency_ms": 5.0,
    "sim_error_rate": 0.0,
    "sim_seed": 3,
}


@pytest.mark.parametrize("endpoint", [{"provider": "sim"}, {"base_url": "http://127.0.0.1:9/v1", "model": "m"}])
def test_a_detached_runs_flags_make_the_same_request(tmp_path, endpoint):
    job = write_batch(tmp_path / "job.jsonl", ["a"])
    given = {"provider": None, "base_url": None, "model": None, **endpoint}
    argv = api.run_argv(job, out=tmp_path / "run", settings=SETTINGS, **given)
    parsed = run_request(build_parser().parse_args(argv))
    made = api.run_request(job, out=tmp_path / "run", settings=SETTINGS, **given)
    assert parsed.options.console.log_format == "json", "a detached run logs JSON lines"
    assert (parsed.job, parsed.out, parsed.table) == (made.job, made.out, made.table)
    options, mine = parsed.options, made.options
    assert (options.provider, options.engine, options.sim) == (mine.provider, mine.engine, mine.sim)
    assert set(api.FLAGS) | set(api.JOB_SETTINGS) == set(api.RunSettings.__annotations__), (
        "every setting goes somewhere"
    )


def test_a_refused_start_sends_nothing_and_leaves_nothing(tmp_path):
    out = tmp_path / "runs" / "nope"
    with pytest.raises(InputError, match="nope-profile"):
        api.start_run(["a", "b"], provider="nope-profile", out=out)
    assert not out.exists(), "the prompts' job written for it went with it"
    with pytest.raises(TypeError, match="unknown run settings: concurency"):
        api.start_run(["a"], out=out, concurency=3)  # type: ignore[call-arg]
    with pytest.raises(InputError, match="prompts"):
        api.start_run([], out=out)
    assert not out.exists()
    job = write_batch(tmp_path / "job.jsonl", ["a"])
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(InputError, match="not empty"):
        api.start_run(job, out=taken)
    assert sorted(p.name for p in taken.iterdir()) == ["notes.txt"], "nothing written beside a user's files"


def test_importing_the_api_loads_no_engine():
    done = subprocess.run(
        [sys.executable, "-c", "import sys, swarm_tui.api; print(sorted(sys.modules))"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    loaded = set(eval(done.stdout))
    assert not {"openai", "textual", "aiohttp", "swarm_tui.engine", "swarm_tui.run.session"} & loaded


def test_estimate_cost_prices_one_run(tmp_path):
    estimate = api.estimate_cost(100, output_tokens=1000, models=["gpt-4.1"])
    official = next(row for row in estimate.rows if row.provider == "official")
    assert official.cost_usd == pytest.approx(100 * 1000 * official.price.output / 1e6)


def test_a_started_run_goes_on_without_its_starter(tmp_path):
    started = api.start_run(
        [f"q{i}" for i in range(12)], out=tmp_path / "run", sim_latency_ms=50, sim_error_rate=0, concurrency=3
    )
    assert started.log == tmp_path / "run" / "run.log"
    with api.RemoteRun(started.run_dir) as remote:
        final = remote.wait(60)
    assert final.state is api.RunState.FINISHED and final.counts["succeeded"] == 12
    events = [json.loads(line)["event"] for line in started.log.read_text(encoding="utf-8").splitlines()]
    assert events[-2:] == ["finished", "summary"], "its log: JSON lines, as a detached run's"
    assert (started.run_dir / "prompts.toml").is_file()
