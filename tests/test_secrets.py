"""API keys come from env vars and never reach the journal, outputs or error text."""

from __future__ import annotations

from .conftest import run_cli, write_batch

KEY = "sk-test-SECRET-0123456789abcdefXYZ"


def test_no_key_in_any_file_of_the_run_directory(tmp_path, sim_factory):
    sim = sim_factory(require_key=KEY)
    job = write_batch(tmp_path / "job.jsonl", [f"task {i}" for i in range(20)] + ["boom [[sim:500]]"])
    result = run_cli("run", str(job), "--headless", "--base-url", sim.base_url, "--api-key-env", "RELAY_KEY",
                     "--out", str(tmp_path / "run"), "--max-attempts", "2", env={"RELAY_KEY": KEY})
    assert result.returncode == 1, result.stderr  # the scripted 500 fails; the rest succeed with the key
    assert sim.stats()["successes"] == 20
    files = [p for p in (tmp_path / "run").rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"journal.sqlite", "results.jsonl", "errors.jsonl", "summary.json"}
    for path in files:
        assert KEY.encode() not in path.read_bytes(), path
    assert KEY not in result.stderr + result.stdout


def test_a_wrong_key_is_an_auth_failure_that_does_not_echo_the_key(tmp_path, sim_factory):
    sim = sim_factory(require_key=KEY)
    wrong = "sk-wrong-key-abcdef0123456789"
    job = write_batch(tmp_path / "job.jsonl", ["hello"])
    result = run_cli("run", str(job), "--headless", "--base-url", sim.base_url, "--api-key-env", "RELAY_KEY",
                     "--out", str(tmp_path / "run"), env={"RELAY_KEY": wrong})
    assert result.returncode == 1
    errors = (tmp_path / "run" / "errors.jsonl").read_text()
    assert "invalid_api_key" in errors
    for path in (tmp_path / "run").rglob("*"):
        if path.is_file():
            assert wrong.encode() not in path.read_bytes(), path
    assert wrong not in result.stderr
