"""Engines declare what they can do: a run that needs what the chosen engine lacks is
refused before anything is written or sent (exit 2, naming it), never silently dropped — the
judge under --ray was dropped before."""

from __future__ import annotations

import json

import pytest
from swarm_tui.core.ports import Capability, missing
from swarm_tui.distributed import CAPABILITIES as RAY
from swarm_tui.engine.engine import SwarmEngine

from tests.conftest import run_cli, write_batch


def test_the_local_engine_declares_everything_and_missing_keeps_a_stable_order():
    assert SwarmEngine.capabilities == frozenset(Capability)
    assert missing(RAY, [Capability.DEADLINE, Capability.ROUTES]) == [Capability.ROUTES, Capability.DEADLINE]
    assert missing(RAY, [Capability.JUDGE, Capability.TOOLS, Capability.BATCH, Capability.CANCEL]) == [], (
        "Ray runs the judge, tools, the batch lane and cancels"
    )
    assert missing(SwarmEngine.capabilities, list(Capability)) == []


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--provider", "a,b"], "a route over several endpoints"),
        (["--deadline", "2h"], "the deadline autopilot"),
    ],
)
def test_a_run_on_ray_that_needs_what_ray_cannot_do_is_refused(tmp_path, extra, named):
    config = tmp_path / "config" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        '[providers.a]\nbase_url = "http://127.0.0.1:9/v1"\n[providers.b]\nbase_url = "http://127.0.0.1:9/v1"\n'
    )
    job = write_batch(tmp_path / "job.jsonl", ["a", "b"])
    result = run_cli("run", str(job), "--ray", "--headless", "--out", str(tmp_path / "run"), *extra)
    assert result.returncode == 2, result.stderr
    assert named in result.stderr and "does not run on Ray yet" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "run").exists(), "nothing made"


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--judge", "self"], "the judge with --budget does not run on Ray yet"),
        (["--lane", "auto"], "the batch lane (--lane auto) with --budget does not run on Ray yet"),
    ],
)
def test_the_judge_or_the_batch_lane_with_a_budget_on_ray_is_refused_by_name(tmp_path, extra, said):
    """The shards' parts of a budget hold neither the judge's calls nor the batches (both made
    from the driver): until they do, each pair is refused on Ray rather than the budget passed
    (each alone runs)."""
    config = tmp_path / "config" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[prices."sim/sim-1"]\ninput = 1.0\ncached_input = 0.5\noutput = 4.0\nmax_output = 512\n')
    job = write_batch(tmp_path / "job.jsonl", ["a", "b"])
    result = run_cli("run", str(job), "--ray", "--headless", "--out", str(tmp_path / "run"), *extra, "--budget", "5")
    assert result.returncode == 2, result.stderr
    assert said in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "run").exists(), "nothing made"


def test_agents_with_python_tools_run_on_ray_from_the_cli(tmp_path, sim_factory):
    """`--tools` on `--ray` was refused; now the tools run on the actors (test_ray.py compares
    such a run with the same run here)."""
    sim = sim_factory(latency_ms=5)
    job = write_batch(tmp_path / "job.jsonl", [f"agent {i} [[sim:tools=1]]" for i in range(6)], max_tokens=512)
    out = tmp_path / "run"
    args = ["run", str(job), "--ray", "--headless", "--base-url", sim.base_url, "--out", str(out)]
    result = run_cli(*args, "--tools", str(write_tools(tmp_path)), timeout=240)
    assert result.returncode == 0, result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["succeeded"] == 6 and summary["agents"]["steps"] == 6
    assert sim.stats()["tool_steps"] == 6


def write_tools(tmp_path):
    path = tmp_path / "tools.toml"
    path.write_text('[[tools.python]]\nfunction = "swarm_tui.examples.mcp_tools:lookup"\n')
    return path
