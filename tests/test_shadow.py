"""`swarm-tui shadow` against two simulators on loopback: ROLLBACK on a 4x slower or erroring
candidate, ADOPT on an equal one, answers compared, keys never shown."""

from __future__ import annotations

import asyncio

import json
import signal
import subprocess
import sys
import time

import pytest

from swarm_tui.cli import main
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.swarm.json_repair import json_answer
from swarm_tui.shadow import (
    ADOPT,
    ROLLBACK,
    EndpointReport,
    ShadowConfig,
    ShadowRun,
    decide,
    endpoint_name,
    mirrored,
    run_shadow,
    safe_url,
)

from .conftest import REPO, run_cli, write_batch

KEY = "sk-shadow-SECRET-9876543210abcdef"
FAST = ["--duration", "2", "--rps", "40", "--rate", "0.5", "--model", "gpt-4.1"]


def _sims(sim_factory, secondary_latency_ms: float, **secondary):
    primary = sim_factory(latency_ms=20.0, latency_sigma=0.3, seed=11)
    return primary, sim_factory(latency_ms=secondary_latency_ms, latency_sigma=0.3, seed=11, **secondary)


def test_rollback_against_a_secondary_4x_slower(tmp_path, sim_factory):
    primary, secondary = _sims(sim_factory, 80.0)
    result = run_cli("shadow", "--primary", primary.base_url, "--secondary", secondary.base_url, *FAST,
                     "--out", str(tmp_path / "shadow"))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "verdict: ROLLBACK" in result.stdout
    report = json.loads((tmp_path / "shadow" / "shadow.json").read_text())
    assert report["verdict"] == ROLLBACK and report["exit_code"] == 1
    assert report["p95_ratio"] > 2.0
    assert report["primary"]["requests"] == 80 == primary.stats()["requests"]
    assert report["secondary"]["requests"] == 40 == secondary.stats()["requests"]  # rate 0.5
    assert report["secondary"]["cost_usd"] == report["shadow_cost_usd"] > 0  # kept apart from the primary's
    assert report["primary"]["cost_usd"] > report["secondary"]["cost_usd"]
    assert "shadow" in result.stderr  # progress and the banner go to stderr


def test_adopt_against_an_equal_secondary_without_ever_printing_the_key(tmp_path, sim_factory):
    primary, secondary = _sims(sim_factory, 20.0, require_key=KEY)
    result = run_cli("shadow", "--primary", primary.base_url, "--secondary", secondary.base_url, *FAST,
                     "--secondary-key-env", "CANDIDATE_KEY", "--out", str(tmp_path / "shadow"),
                     env={"CANDIDATE_KEY": KEY})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "verdict: ADOPT" in result.stdout
    text = (tmp_path / "shadow" / "shadow.json").read_text()
    report = json.loads(text)
    assert report["verdict"] == ADOPT and report["p95_ratio"] <= 2.0
    assert report["secondary"]["succeeded"] == 40 and report["secondary"]["errors"] == {}
    assert report["agreement"]["compared"] == 40 and report["agreement"]["exact_share"] == 1.0  # same seed
    assert report["agreement"]["length_ratio"]["median"] == 1.0
    assert KEY not in result.stdout + result.stderr + text


async def test_an_erroring_secondary_is_rolled_back_and_updates_flow_while_it_runs(sim_factory):
    primary, secondary = _sims(sim_factory, 20.0, error_rate=0.3)
    updates = []
    config = ShadowConfig(primary=ProviderProfile("a", base_url=primary.base_url),
                          secondary=ProviderProfile("b", base_url=secondary.base_url),
                          model="sim-1", rate=0.5, duration_s=1.5, rps=40, update_interval_s=0.2)
    report = await run_shadow(config, on_update=updates.append)
    assert report.verdict == ROLLBACK and report.exit_code == 1
    assert report.secondary.errors.get("server_error", 0) >= 2
    assert any("error rate" in reason and "above the primary" in reason for reason in report.reasons)
    assert report.p95_ratio is not None and report.p95_ratio <= 2.0  # latency alone would have adopted
    assert report.primary.cost_usd is None and "price unknown" in report.primary.cost_display  # sim-1: no price
    assert len(updates) >= 4 and not updates[0].finished and updates[-1].finished
    assert updates[0].primary.requests < updates[-1].primary.requests


async def test_streaming_measures_time_to_first_token_and_stop_ends_early(sim_factory):
    primary, secondary = _sims(sim_factory, 20.0)
    config = ShadowConfig(primary=ProviderProfile("a", base_url=primary.base_url),
                          secondary=ProviderProfile("b", base_url=secondary.base_url), model="gpt-4.1",
                          rate=0.5, duration_s=30, rps=20, stream=True, update_interval_s=0.1)
    run = ShadowRun(config, on_update=lambda r: run.stop() if r.elapsed_s > 0.8 else None)
    started = time.monotonic()
    report = await run.run()
    assert time.monotonic() - started < 5
    assert report.stopped_early and report.exit_code == 130
    assert report.primary.ttft_ms["p50"] is not None and report.secondary.ttft_ms["p50"] is not None
    assert report.primary.ttft_ms["p50"] <= report.primary.latency_ms["p50"]
    assert primary.stats()["streams"] == report.primary.requests


def test_a_job_is_sent_once_request_by_request(tmp_path, sim_factory):
    primary, secondary = _sims(sim_factory, 20.0)
    job = write_batch(tmp_path / "job.jsonl", [f"question {i}" for i in range(12)])
    result = run_cli("shadow", "--primary", primary.base_url, "--secondary", secondary.base_url, "--job", str(job),
                     "--rps", "50", "--rate", "0.25", "--duration", "60", "--json", "--out", str(tmp_path / "s"))
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["elapsed_s"] < 5  # the job ran out long before the duration
    assert primary.stats()["requests"] == 12 and secondary.stats()["requests"] == 3
    assert report["settings"]["workload"] == str(job)


def test_ctrl_c_writes_the_report_and_exits_130(tmp_path, sim_factory):
    primary, secondary = _sims(sim_factory, 20.0)
    proc = subprocess.Popen([sys.executable, "-m", "swarm_tui", "shadow", "--primary", primary.base_url,
                             "--secondary", secondary.base_url, "--model", "m", "--duration", "60", "--rps", "20",
                             "--rate", "0.5", "--out", str(tmp_path / "s")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    deadline = time.monotonic() + 20
    while primary.stats()["requests"] < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, out + err
    report = json.loads((tmp_path / "s" / "shadow.json").read_text())
    assert report["stopped_early"] and report["primary"]["requests"] >= 5


@pytest.mark.parametrize("argv, message", [
    (["--rate", "0"], "--rate"),
    (["--rate", "0.01", "--duration", "1", "--rps", "5"], "mirrors none to the secondary"),
    (["--secondary", "nobody"], "no profile named 'nobody' (known: openai, sim)"),
    (["--secondary", "https://api.example.invalid/v1"], "OPENAI_API_KEY is not set"),
    (["--primary", "ftp://x"], "not an http(s) URL"),
    (["--job", "/nonexistent.jsonl"], "file not found"),
])
def test_bad_input_exits_2_before_anything_is_sent(argv, message, capsys, sim):
    base = {"--primary": sim.base_url, "--secondary": sim.base_url, "--model": "m", "--duration": "2"}
    flags = dict(zip(argv[::2], argv[1::2]))
    merged = [x for k, v in {**base, **flags}.items() for x in (k, v)]
    try:
        code = main(["shadow", *merged])
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    assert message in capsys.readouterr().err
    assert sim.stats()["requests"] == 0


def test_the_rules_behind_the_verdict():
    assert [i for i in range(30) if mirrored(i, 0.1)] == [9, 19, 29]
    assert sum(mirrored(i, 0.25) for i in range(1000)) == 250
    assert all(mirrored(i, 1.0) for i in range(10))

    def ep(p95, requests=100, errors=0):
        return EndpointReport("x", "x", "u", "m", False, requests, 0, requests - errors,
                              {"server_error": errors} if errors else {}, errors / requests,
                              {"p50": p95 / 2, "p95": p95, "p99": p95, "mean": p95 / 2}, None,
                              {"prompt": 0, "completion": 0, "cached": 0}, None, "", None)

    assert decide(ep(118), ep(184), threshold=2.0, max_error_excess=0.01)[0] == ADOPT  # the article's figures
    assert decide(ep(100), ep(250), threshold=2.0, max_error_excess=0.01)[0] == ROLLBACK
    assert decide(ep(100), ep(100, errors=5), threshold=2.0, max_error_excess=0.01)[0] == ROLLBACK
    assert decide(ep(100), ep(100, errors=1), threshold=2.0, max_error_excess=0.01)[0] == ADOPT  # one error alone
    assert decide(ep(100), ep(100, requests=3, errors=3), threshold=2.0, max_error_excess=0.01)[0] == ROLLBACK

    assert json_answer('```json\n{"a": [1, 2]}\n```') == {"a": [1, 2]}
    with pytest.raises(ValueError):
        json_answer("not json")
    assert endpoint_name("https://api.holysheep.ai/v1") == "holysheep"
    assert endpoint_name("https://api.moonshot.cn/v1") == "moonshot"
    assert endpoint_name("http://127.0.0.1:8001/v1") == "127.0.0.1:8001"
    assert safe_url("https://user:pw@host.example/v1?key=abc") == "https://host.example/v1"


async def test_the_live_view_shows_both_endpoints_and_returns_the_verdict(sim_factory):
    from textual.widgets import Static

    from swarm_tui.shadow import ShadowRun
    from swarm_tui.ui.shadow_view import ShadowApp

    primary, secondary = _sims(sim_factory, 20.0)
    config = ShadowConfig(primary=ProviderProfile("a", base_url=primary.base_url),
                          secondary=ProviderProfile("b", base_url=secondary.base_url),
                          model="sim-1", rate=0.5, duration_s=1.0, rps=40, update_interval_s=0.2)
    app = ShadowApp(ShadowRun(config))
    async with app.run_test(size=(100, 30)) as pilot:
        deadline = asyncio.get_running_loop().time() + 10
        while app._final is None:
            assert asyncio.get_running_loop().time() < deadline, "the shadow run did not finish"
            await pilot.pause(0.1)
        await pilot.pause(0.3)
        text = str(app.query_one("#shadow-report", Static).render())
        assert "primary a" in text and "secondary b (shadow)" in text and "latency p95" in text
        assert "verdict: ADOPT" in str(app.query_one("#shadow-verdict", Static).render())
        await pilot.press("q")
    assert app.return_value is not None and app.return_value.verdict == "ADOPT"
