"""A run's report: one self-contained HTML file, opened in a real browser (headless Chromium,
the distribution's package), whose charts' labels and figures are read back and found equal to
summary.json's; fast and small for 100,000 tasks; a snapshot of a running run; the console's key."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import time
from html.parser import HTMLParser
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from swarm_tui.config import Config
from swarm_tui.core.call_errors import CallError, ErrorClass
from swarm_tui.core.events import (
    AnswerJudged,
    Attempt,
    AttemptStarted,
    ConcurrencyChanged,
    RateLimitsLearned,
    RunFinished,
    RunStarted,
    TaskFailed,
    TaskRetrying,
    TaskSucceeded,
)
from swarm_tui.core.task import Task
from swarm_tui.core.usage import Usage
from swarm_tui.engine import EngineSettings
from swarm_tui.frontend.attached import AttachedRun
from swarm_tui.journal import IncompleteRunError, Journal
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.records import RunPlan
from swarm_tui.ui.app import make_app

from tests.conftest import run_cli, start_cli
from tests.helpers import open_session
from tests.test_routes import write_config
from tests.test_tables import tickets, write_csv
from tests.test_ui_app import wait_for

URL = re.compile(r"\b(?:https?|ftp)://[^\s\"'<>)]+", re.IGNORECASE)


def chromium() -> str:
    """The distribution's Chromium (`.ci/run` installs it); a machine without one skips, CI fails."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed: .ci/run installs the distribution's package")
        pytest.skip("no chromium here (apt-get install chromium)")
    return found


def rendered(page: Path, tmp_path: Path) -> tuple[str, Path]:
    """The page as headless Chromium rendered it: its DOM once loaded, and a screenshot."""
    browser = chromium()
    common = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars"]
    common += [f"--user-data-dir={tmp_path / 'chromium-profile'}", "--window-size=1100,2400"]
    url = page.resolve().as_uri()
    dom = subprocess.run([*common, "--dump-dom", url], capture_output=True, text=True, timeout=120, check=True).stdout
    shot = tmp_path / "page.png"
    subprocess.run([*common, f"--screenshot={shot}", url], capture_output=True, timeout=120, check=True)
    return dom, shot


class Page(HTMLParser):
    """What a reader of the rendered DOM finds: each figure (`data-figure` -> its value and its
    text), the text of every chart (SVG `<text>`), each table's rows, the status badge."""

    def __init__(self, dom: str) -> None:
        super().__init__()
        self.figures: dict[str, tuple[str | None, str]] = {}
        self.chart_text: dict[str, list[str]] = {}
        self.tables: dict[str, list[list[str]]] = {}
        self.status = ""
        self._figure: tuple[str, str | None] | None = None
        self._figure_tag = ""
        self._chart: str | None = None
        self._table: str | None = None
        self._text: list[str] = []
        self._in_text = self._in_cell = self._in_status = False
        self.feed(dom)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "data-figure" in a:
            self._figure, self._figure_tag, self._text = (a["data-figure"], a.get("data-value")), tag, []
        if tag == "div" and (a.get("id") or "").startswith("chart-"):
            self._chart = a["id"].removeprefix("chart-")
            self.chart_text[self._chart] = []
        if tag == "text":
            self._in_text, self._text = True, []
        if tag == "table" and a.get("id"):
            self._table = a["id"]
            self.tables[self._table] = []
        if tag == "tr" and self._table:
            self.tables[self._table].append([])
        if tag in ("td", "th") and self._table:
            self._in_cell, self._text = True, []
        if a.get("id") == "status":
            self._in_status = True

    def handle_endtag(self, tag):
        if self._figure is not None and tag == self._figure_tag:
            key, value = self._figure
            self.figures[key] = (value, "".join(self._text).strip())
            self._figure = None
        if tag == "text" and self._chart is not None:
            self.chart_text[self._chart].append("".join(self._text))
            self._in_text = False
        if tag == "svg":
            self._chart = None
        if tag in ("td", "th") and self._table and self._in_cell:
            self.tables[self._table][-1].append(" ".join("".join(self._text).split()))
            self._in_cell = False
        if tag == "table":
            self._table = None
        if tag == "span":
            self._in_status = False

    def handle_data(self, data):
        if self._figure is not None or self._in_text or self._in_cell:
            self._text.append(data)
        if self._in_status:
            self.status += data


def summary_value(summary: dict, key: str):
    value = summary
    for part in key.split("."):
        value = value[part]
    return value


def assert_agrees_with_summary(page: Page, summary: dict) -> None:
    assert len(page.figures) >= 15
    for key, (value, shown) in page.figures.items():
        expected = summary_value(summary, key)
        assert (value is None) == (expected is None), key
        if expected is not None:
            assert float(value) == pytest.approx(float(expected)), key
            assert shown, key


def test_the_report_of_a_run_renders_in_chromium_and_its_figures_are_summary_jsons(tmp_path, sim_factory):
    """A run paced by a limited simulator (429s), with 5xx errors, a budget and a table: the report
    opened in headless Chromium shows every chart, and what it says equals summary.json."""
    sim = sim_factory(
        mode="process", rpm=2400, burst_s=0.25, rate_headers=False, error_rate=0.06, latency_ms=15.0, seed=5
    )  # no rate headers: the limit is found from its 429s, and learned (RateLimitsLearned, estimated)
    write_csv(tmp_path / "tickets.csv", {k: [str(v) for v in values] for k, values in tickets(400).items()})
    job = tmp_path / "triage.toml"
    job.write_text(
        'name = "triage"\nmodel = "kimi-k2.5"\n[request]\nmax_tokens = 48\n'
        '[tasks]\nfrom = "tickets.csv"\nprompt = "Classify: {text}"\nid = "{ticket_id}"\n',
        encoding="utf-8",
    )
    run_dir = tmp_path / "run"
    ran = run_cli(
        "run", str(job), "--headless", "--out", str(run_dir), "--base-url", sim.base_url,
        "--budget", "1", "--concurrency", "40", "--max-attempts", "2",
    )  # fmt: skip
    assert ran.returncode in (0, 1), ran.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["requests"]["rate_limited"] > 0 and summary["requests"]["server_errors"] > 0, summary["requests"]

    made = run_cli("report", str(run_dir))
    assert made.returncode == 0, made.stderr
    page_file = run_dir / "report.html"
    assert f"report: {page_file}" in made.stdout
    html = page_file.read_text(encoding="utf-8")
    assert URL.findall(html) == []  # not even the simulator's (its 429s name one, as OpenAI's do)
    assert "platform.openai.com/account/rate-limits" in html  # said, without its scheme
    assert "<script" not in html and "<link" not in html and "src=" not in html

    dom, shot = rendered(page_file, tmp_path)
    page = Page(dom)
    assert page.status == "finished"
    assert_agrees_with_summary(page, summary)
    charts = page.chart_text
    assert {"timeline", "limits", "latency", "cost_time", "cost_split", "errors"} <= set(charts)
    assert {"Answers and requests over time", "requests/s", "answers/s", "429s", "errors"} <= set(charts["timeline"])
    assert {"in-flight limit", "ceiling", "RPM learned"} <= set(charts["limits"])
    latency = summary["latency_ms"]
    for name in ("p50", "p95", "p99"):
        assert f" {name} {latency[name]:,.1f} ms" in charts["latency"]
    assert f"spent: ${summary['cost_usd']:.4f}" in charts["cost_time"] and "budget $1.00" in charts["cost_time"]
    assert f" ${summary['cost_breakdown']['by_lane']['live']:.4f}" in charts["cost_split"]
    errors = {row[0]: int(row[1].replace(",", "")) for row in page.tables["errors"][1:]}
    assert errors["rate_limit"] == summary["requests"]["rate_limited"]
    assert errors["server_error"] == summary["requests"]["server_errors"]
    assert f" {errors['server_error']:,}" in charts["errors"]
    assert any(row[0] == "finish what it left" or "report" in row[1] for row in page.tables["next"])
    assert ["table", "csv: ticket_id, text, product, priority, score, vip"] in page.tables["settings"]
    assert len(page.tables["slowest"]) > 1
    assert shot.stat().st_size > 50_000  # a screenshot of charts, not of a blank page


def test_a_routed_runs_report_gives_each_endpoints_latency(tmp_path, sim_factory):
    fast = sim_factory(latency_ms=20.0, seed=1)
    slow = sim_factory(latency_ms=120.0, seed=2)
    write_config(tmp_path, {"fast": fast.base_url, "slow": slow.base_url})
    pq.write_table(pa.table(tickets(300)), tmp_path / "tickets.parquet")
    run_dir = tmp_path / "run"
    ran = run_cli(
        "run", str(tmp_path / "tickets.parquet"), "--prompt", "{text}", "--provider", "fast,slow", "--route",
        "balance", "--headless", "--out", str(run_dir),
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert run_cli("report", str(run_dir)).returncode == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    page = Page((run_dir / "report.html").read_text(encoding="utf-8"))
    assert_agrees_with_summary(page, summary)  # the endpoints' p50 and p95 too
    assert {"endpoints.fast.p50_ms", "endpoints.slow.p95_ms"} <= set(page.figures)
    rows = {row[0]: row for row in page.tables["endpoints"][1:]}
    assert set(rows) == {"fast", "slow"}
    assert sum(int(row[1].replace(",", "")) for row in rows.values()) == summary["succeeded"]
    assert {"fast", "slow"} <= set(page.chart_text["latency"])  # a curve an endpoint
    assert {"fast limit", "slow limit"} <= set(page.chart_text["limits"])


# ----------------------------------------------------------------- 100,000 tasks


class _Clock:
    """The journal's clock while a run is made up: it moves as the made-up run does."""

    def __init__(self, start: float) -> None:
        self.now = start

    def time(self) -> float:
        return self.now


def made_up_run(run_dir: Path, n: int, monkeypatch) -> None:
    """A finished run of `n` tasks written through the journal's own write path (the events a run
    logs, as a run logs them), over 20 minutes: 429s and their retries, 5xx failures, the judge's
    scores, the limit moving; then its outputs written by `swarm-tui export`."""
    import swarm_tui.journal.writer as writer_module

    start = time.time() - 3600
    clock = _Clock(start)
    monkeypatch.setattr(writer_module, "time", clock)
    plan = RunPlan(ProviderProfile(name="sim"), EngineSettings.of(concurrency=200, budget_usd=60.0))
    meta = {
        "job": {"name": "made-up", "source": "made-up.parquet", "options": {}, "table": {"kind": "parquet",
                "columns": [{"name": "id", "kind": "string"}, {"name": "text", "kind": "string"}]}},
        "plan": plan.to_meta(), "swarm": None, "template": None, "tools": None, "judge": None,
    }  # fmt: skip
    tasks = (
        Task(
            i, f"t-{i:06d}", {"model": "kimi-k2.5", "max_tokens": 64, "messages": [{"role": "user", "content": f"{i}"}]}
        )
        for i in range(n)
    )
    rows = (json.dumps({"id": f"t-{i:06d}", "text": f"row {i}"}) for i in range(n))
    journal = Journal.create(run_dir, tasks, meta, rows=rows)
    journal.begin_session()
    write = journal.writer.append
    write([RunStarted(n, n, 100, "sim", True, 200), RateLimitsLearned(60_000, 2_000_000)])
    span_s = 1200.0
    batch: list = []
    for i in range(n):
        at = start + span_s * i / n
        clock.now = at
        usage = Usage(prompt=20, completion=60)
        number = 1
        if i % 50 == 7:  # a 429, retried
            error = CallError(ErrorClass.RATE_LIMIT, "Rate limit reached for requests", 429, "rate_limit_exceeded")
            batch.append(TaskRetrying(Attempt(i, 1, "sim", at, 30.0, "retry", 429, error, retry_in_s=1.0), 1.0))
            number = 2
        latency = 40.0 + (i * 7919 % 1000) / 4
        if i % 997 == 3:
            error = CallError(ErrorClass.SERVER, "The server had an error", 500, "server_error")
            batch.append(TaskFailed(Attempt(i, number, "sim", at, latency, "failed", 500, error)))
        else:
            attempt = Attempt(i, number, "sim", at, latency, "ok", 200, None, f"req-{i}", usage, 0.0002)
            body = {
                "id": f"c{i}",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": f"answer {i}"}}],
            }
            batch += [
                AttemptStarted(i, number, "sim"),
                TaskSucceeded(attempt, f"answer {i}", json.dumps(body).encode()),
            ]
            if i % 100 == 0:
                batch.append(AnswerJudged(i, 6.0 + (i % 5) / 2, "fine", round=1 + i * 3 // n))
        if i % 5000 == 0:
            batch.append(ConcurrencyChanged(100 + (i // 5000) % 7 * 10, "clean"))
        if len(batch) >= 5000:
            write(batch)
            batch = []
    clock.now = start + span_s
    write([*batch, RunFinished(n - len(range(3, n, 997)), len(range(3, n, 997)), 0, False)])
    journal.close()
    monkeypatch.undo()
    exported = run_cli("export", str(run_dir))
    assert exported.returncode == 0, exported.stderr


@pytest.fixture(scope="module")
def run_of_100000(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("report") / "made-up"
    with pytest.MonkeyPatch.context() as monkeypatch:
        made_up_run(run_dir, 100_000, monkeypatch)
    return run_dir


def test_the_report_of_100000_tasks_takes_seconds_and_megabytes_and_names_no_web_address(run_of_100000, tmp_path):
    out = tmp_path / "big.html"
    started = time.monotonic()
    made = run_cli("report", str(run_of_100000), "-o", str(out))
    took = time.monotonic() - started
    assert made.returncode == 0, made.stderr
    assert took < 10, f"{took:.1f} s (the whole command, a fresh process)"
    assert out.stat().st_size < 5 * 2**20
    html = out.read_text(encoding="utf-8")
    assert URL.findall(html) == []
    summary = json.loads((run_of_100000 / "summary.json").read_text())
    assert summary["total"] == 100_000
    page = Page(rendered(out, tmp_path)[0])
    assert_agrees_with_summary(page, summary)
    assert "The judge's scores by round" in page.chart_text["scores"]
    assert "round 1" in page.chart_text["scores"] and "round 3" in page.chart_text["scores"]
    failed = page.tables["failed"]
    assert len(failed) == 1 + 15 and failed[1][1] == "t-000003"  # the first 15 listed, with their attempts
    assert f"and {summary['failed'] - 15:,} more" in html


def test_the_table_export_of_100000_tasks_gives_every_row_back_in_order(run_of_100000, tmp_path):
    out = tmp_path / "answers.parquet"
    assert run_cli("export", str(run_of_100000), "--format", "parquet", "-o", str(out)).returncode == 0
    table = pq.read_table(out)
    assert table.num_rows == 100_000
    assert table.column("id").to_pylist() == [f"t-{i:06d}" for i in range(100_000)]
    status = table.column("status").to_pylist()
    assert status.count("failed") == len(range(3, 100_000, 997))
    assert table.column("attempts").to_pylist()[7] == 2 and table.column("error_class").to_pylist()[3] == "server_error"


# ----------------------------------------------------------------- a running run, the console


def test_a_running_runs_report_is_a_snapshot_that_says_so(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=250.0, latency_sigma=0.0)
    pq.write_table(pa.table(tickets(60)), tmp_path / "tickets.parquet")
    run_dir = tmp_path / "run"
    child = start_cli(
        "run", str(tmp_path / "tickets.parquet"), "--prompt", "{text}", "--headless", "--out", str(run_dir),
        "--base-url", sim.base_url, "--model", "sim-1", "--concurrency", "2", "--no-adaptive",
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not _answers(run_dir) >= 4:
            assert child.poll() is None and time.monotonic() < deadline, "the run never answered 4 tasks"
            time.sleep(0.1)
        made = run_cli("report", str(run_dir))
        assert made.returncode == 0, made.stderr
        assert "(a snapshot: the run is going on)" in made.stdout
        html = (run_dir / "report.html").read_text(encoding="utf-8")
        assert 'id="status">running</span>' in html and "running: a snapshot as of" in html
        assert f"swarm-tui attach {run_dir}" in html
        assert child.poll() is None, "the report stopped the run"
        succeeded = int(re.search(r'data-figure="succeeded" data-value="(\d+)"', html).group(1))
        assert 4 <= succeeded < 60
    finally:
        child.send_signal(signal.SIGINT)
        child.wait(60)


def _answers(run_dir: Path) -> int:
    try:
        journal = Journal.open(run_dir, readonly=True)
    except (FileNotFoundError, IncompleteRunError):  # not made yet
        return 0
    try:
        return journal.queries.result_count()
    finally:
        journal.close()


async def test_the_consoles_key_writes_the_report_and_says_where(tmp_path, sim_factory):
    sim = sim_factory()
    session = open_session(tmp_path, sim.base_url, [f"task {i}" for i in range(20)])
    try:
        await session.run()
    finally:
        await session.aclose()
    source = AttachedRun(tmp_path / "run")
    app = make_app(source, config=Config(path=tmp_path / "config.toml"))
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("w")
            said = lambda: [n.message for n in app._notifications if n.title == "Report"]  # noqa: E731
            await wait_for(pilot, lambda: said(), timeout=60, what="the report's notification")
            assert f"Report written: {tmp_path / 'run' / 'report.html'}" in said()[0]
            await pilot.press("q")
    finally:
        await source.aclose()
    html = (tmp_path / "run" / "report.html").read_text(encoding="utf-8")
    assert 'data-figure="succeeded" data-value="20"' in html
    await asyncio.sleep(0)
