"""Many endpoints, one swarm: `--provider a,b,c --route ...` and `[routes.NAME]`.

Each test runs the real CLI in a subprocess against real simulators on loopback, one a door,
and reads what it did from the journal, summary.json and the simulators' own counters."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from swarm_tui.records import RunPlan

from tests.conftest import kill_when, read_jsonl, run_cli, start_cli, write_batch

MODEL = "gpt-4.1-mini"
TWO_PRICES = (
    f'\n[prices."cheap/{MODEL}"]\ninput = 0.1\noutput = 0.4\n\n[prices."dear/{MODEL}"]\ninput = 2.0\noutput = 8.0\n'
)
"""Two endpoints of one model, one 20x the other's price."""


def write_config(tmp_path: Path, doors: dict[str, str], extra: str = "") -> Path:
    """A config whose profiles are the doors (name: base URL), and `extra` TOML after them."""
    path = tmp_path / "config" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    tables = [f'[providers.{name}]\nbase_url = "{url}"\nmodel = "{MODEL}"\n' for name, url in doors.items()]
    path.write_text("\n".join(tables) + extra, encoding="utf-8")
    return path


def attempts_by_endpoint(run_dir: Path) -> Counter:
    with sqlite3.connect(run_dir / "journal.sqlite") as db:
        return Counter(dict(db.execute("SELECT endpoint, COUNT(*) FROM attempts GROUP BY endpoint").fetchall()))


def logged(run_dir: Path, kind: str) -> list[dict]:
    with sqlite3.connect(run_dir / "journal.sqlite") as db:
        return [json.loads(row[0]) for row in db.execute("SELECT data FROM log WHERE kind = ? ORDER BY seq", (kind,))]


def served_once(run_dir: Path, sims, prompts: list[str]) -> None:
    """Every task has one result, and the simulators together answered each prompt once."""
    results = read_jsonl(run_dir / "results.jsonl")
    assert sorted(r["custom_id"] for r in results) == [f"task-{i:04d}" for i in range(len(prompts))]
    answered: Counter = Counter()
    for sim in sims:
        answered.update(sim.stats()["successes_by_prompt"])
    assert answered == Counter(prompts), "a task was answered twice, or not at all"


def test_balance_spreads_a_swarm_over_three_keys_whose_limits_add_up(tmp_path, sim_factory):
    sims = [sim_factory(mode="process", latency_ms=50, latency_sigma=0.1, rpm=600) for _ in range(3)]
    write_config(tmp_path, {name: s.base_url for name, s in zip("abc", sims, strict=True)})
    prompts = [f"balanced {i}" for i in range(150)]
    job = write_batch(tmp_path / "job.jsonl", prompts, model=MODEL, max_tokens=16)
    run_dir = tmp_path / "run"
    done = run_cli("run", str(job), "--headless", "--provider", "a,b,c", "--route", "balance", "--out", str(run_dir))
    assert done.returncode == 0, done.stderr
    served_once(run_dir, sims, prompts)
    requests = sum(s.stats()["requests"] for s in sims)
    limited = sum(s.stats()["rate_limited"] for s in sims)
    assert limited <= 0.05 * requests, f"{limited} of {requests} requests answered 429"
    summary = json.loads((run_dir / "summary.json").read_text())
    endpoints = summary["endpoints"]
    assert set(endpoints) == {"a", "b", "c"}
    for name, door in endpoints.items():
        assert door["answered"] >= len(prompts) / 4, (name, endpoints)
        assert door["p50_ms"] is not None and door["p95_ms"] >= door["p50_ms"]
    assert sum(d["requests"] for d in endpoints.values()) == requests
    assert sum(d["rate_limited"] for d in endpoints.values()) == limited
    meta = json.loads(
        sqlite3.connect(run_dir / "journal.sqlite").execute("SELECT value FROM meta WHERE key = 'plan'").fetchone()[0]
    )
    route = RunPlan.from_meta(meta).route
    assert route is not None and route.strategy == "balance" and [p.name for p in route.others] == ["b", "c"]


def test_a_chain_of_three_whose_first_two_only_fail_is_served_by_the_third(tmp_path, sim_factory):
    broken = [sim_factory(error_rate=1.0) for _ in range(2)]
    healthy = sim_factory()
    write_config(
        tmp_path,
        {"first": broken[0].base_url, "second": broken[1].base_url, "third": healthy.base_url},
        '\n[routes.chain]\nproviders = ["first", "second", "third"]\nstrategy = "fallback"\n',
    )
    prompts = [f"chained {i}" for i in range(100)]
    job = write_batch(tmp_path / "job.jsonl", prompts, model=MODEL)
    run_dir = tmp_path / "run"
    done = run_cli("run", str(job), "--headless", "--provider", "chain", "--out", str(run_dir))
    assert done.returncode == 0, done.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["succeeded"] == 100 and summary["failed"] == 0
    served_once(run_dir, [*broken, healthy], prompts)
    switches = logged(run_dir, "EndpointSwitched")
    sources = [s.get("source") for s in switches]
    assert "first" in sources and "second" in sources, switches
    assert all(s["reason"] for s in switches)
    first = next(s for s in switches if s["source"] == "first")
    assert "endpoint first" in first["reason"] and first["endpoint"] != "first", first
    assert summary["endpoints"]["third"]["answered"] == 100


def test_cheapest_sends_everything_to_the_cheaper_door_while_it_has_room(tmp_path, sim_factory):
    cheap, dear = sim_factory(), sim_factory()
    write_config(tmp_path, {"dear": dear.base_url, "cheap": cheap.base_url}, TWO_PRICES)
    prompts = [f"cheap {i}" for i in range(60)]
    job = write_batch(tmp_path / "job.jsonl", prompts, model=MODEL)
    run_dir = tmp_path / "run"
    done = run_cli(
        "run",
        str(job),
        "--headless",
        "--provider",
        "dear,cheap",
        "--route",
        "cheapest",
        "--out",
        str(run_dir),
    )
    assert done.returncode == 0, done.stderr
    assert attempts_by_endpoint(run_dir) == Counter({"cheap": 60}), "the dearer door was used while the cheap had room"
    assert dear.stats()["requests"] == 0
    served_once(run_dir, [cheap, dear], prompts)


def test_max_price_never_sends_above_it_and_refuses_a_route_it_leaves_empty(tmp_path, sim_factory):
    cheap, dear = sim_factory(), sim_factory()
    write_config(tmp_path, {"dear": dear.base_url, "cheap": cheap.base_url}, TWO_PRICES)
    prompts = [f"capped {i}" for i in range(30)]
    job = write_batch(tmp_path / "job.jsonl", prompts, model=MODEL)
    done = run_cli(
        "run",
        str(job),
        "--headless",
        "--provider",
        "dear,cheap",
        "--route",
        "balance",
        "--max-price",
        "1",
        "--out",
        str(tmp_path / "run"),
    )
    assert done.returncode == 0, done.stderr
    assert dear.stats()["requests"] == 0 and cheap.stats()["successes"] == 30
    refused = run_cli(
        "run",
        str(job),
        "--headless",
        "--provider",
        "dear,cheap",
        "--max-price",
        "0.1",
        "--out",
        str(tmp_path / "r2"),
    )
    assert refused.returncode == 2, refused.stderr
    assert "--max-price" in refused.stderr and "0.1" in refused.stderr
    assert dear.stats()["requests"] == 0 and cheap.stats()["successes"] == 30, "nothing sent"


@pytest.mark.parametrize(
    ("table", "field", "said"),
    [
        ('providers = ["a"]', "routes.pool.providers", "two or more"),
        ('providers = ["a", "zz"]', "routes.pool.providers", "no profile named 'zz'"),
        ('providers = ["a", "b"]\nstrategy = "random"', "routes.pool.strategy", "fallback, balance, cheapest, fastest"),
        ('providers = ["a", "b"]\nmax_price = -1', "routes.pool.max_price", "positive number"),
    ],
)
def test_a_bad_route_table_names_its_file_and_field(tmp_path, sim, table, field, said):
    path = write_config(tmp_path, {"a": sim.base_url, "b": sim.base_url}, f"\n[routes.pool]\n{table}\n")
    job = write_batch(tmp_path / "job.jsonl", ["x"], model=MODEL)
    done = run_cli("run", str(job), "--headless", "--provider", "pool", "--out", str(tmp_path / "run"))
    assert done.returncode == 2
    assert str(path) in done.stderr and field in done.stderr and said in done.stderr, done.stderr
    assert sim.stats()["requests"] == 0


def test_a_route_is_refused_on_ray_by_name(tmp_path, sim):
    write_config(tmp_path, {"a": sim.base_url, "b": sim.base_url})
    job = write_batch(tmp_path / "job.jsonl", ["x"], model=MODEL)
    done = run_cli("run", str(job), "--headless", "--provider", "a,b", "--ray", "--out", str(tmp_path / "run"))
    assert done.returncode == 2 and "route" in done.stderr and "Ray" in done.stderr, done.stderr
    assert sim.stats()["requests"] == 0


def test_a_killed_routed_run_resumes_on_its_route_without_sending_a_success_again(tmp_path, sim_factory):
    sims = [sim_factory(mode="process", latency_ms=150, latency_sigma=0.1) for _ in range(2)]
    write_config(tmp_path, {"a": sims[0].base_url, "b": sims[1].base_url})
    prompts = [f"resumed {i}" for i in range(200)]
    job = write_batch(tmp_path / "job.jsonl", prompts, model=MODEL)
    run_dir = tmp_path / "run"
    child = start_cli(
        "run",
        str(job),
        "--headless",
        "--provider",
        "a,b",
        "--route",
        "balance",
        "--concurrency",
        "5",
        "--out",
        str(run_dir),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=os.environ.copy(),
    )
    kill_when(child, lambda: sum(s.stats()["successes"] for s in sims) >= 40, "40 answers")
    with sqlite3.connect(run_dir / "journal.sqlite") as db:
        done_before = {row[0] for row in db.execute("SELECT custom_id FROM tasks WHERE state = 'succeeded'")}
    assert done_before
    for s in sims:
        s.reset()
    resumed = run_cli("resume", str(run_dir), "--headless")
    assert resumed.returncode == 0, resumed.stderr
    sent_again = Counter()
    for s in sims:
        sent_again.update(s.stats()["successes_by_prompt"])
        assert s.stats()["successes"] > 0, "the resume kept to one door: the route was lost"
    again = {f"task-{prompts.index(p):04d}" for p in sent_again}
    assert not again & done_before, "a journaled success was sent again"
    assert len(read_jsonl(run_dir / "results.jsonl")) == 200
