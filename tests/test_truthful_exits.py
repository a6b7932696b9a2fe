"""Exit codes that tell the truth, and `resume --model` that applies.

A run whose results.jsonl or summary.json cannot be written at the end exits 1 with the reason,
headless and in the TUI alike (one rule, `run.exit_codes.exit_code`); a resume never leaves the last
session's results.jsonl to look current; `resume --model X` on the run's own endpoint sends X.
"""

from __future__ import annotations

import json
import resource
import sqlite3
import subprocess
import sys

from swarm_tui.frontend.live import LiveRun
from swarm_tui.run.exit_codes import exit_code

from tests.conftest import read_jsonl, run_cli, write_batch
from tests.helpers import open_session, run_session
from tests.hostile_answers import ByteHostileServer


def cli_under_file_limit(limit: int, *args: str) -> subprocess.CompletedProcess:
    """`swarm-tui ARGS` with `ulimit -f limit` (bytes): no file it writes may grow past it."""

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    return subprocess.run(
        [sys.executable, "-m", "swarm_tui", *args], capture_output=True, text=True, timeout=120, preexec_fn=limited
    )


def test_a_resume_whose_outputs_cannot_be_written_exits_1_and_leaves_no_stale_results(tmp_path):
    server = ByteHostileServer().start()
    try:
        prompts = [f"t{i} [[hostile:big]]" for i in range(39)] + ["once [[hostile:noretryx1]]"]  # a 503 not retried
        job = write_batch(tmp_path / "job.jsonl", prompts)
        run_dir = tmp_path / "run"
        first = run_cli("run", str(job), "--headless", "--base-url", server.base_url, "--out", str(run_dir))
        assert first.returncode == 1, first.stderr
        assert len(read_jsonl(run_dir / "results.jsonl")) == 39 and len(read_jsonl(run_dir / "errors.jsonl")) == 1
        limit = 768 * 1024  # results.jsonl (40 answers of 32 KiB) cannot fit; this session's journal writes do
        resumed = cli_under_file_limit(limit, "resume", str(run_dir), "--headless", "--retry-failed")
        assert resumed.returncode == 1, resumed.stderr
        assert "Traceback" not in resumed.stderr
        assert "results.jsonl and summary.json not written" in resumed.stderr and "file size limit" in resumed.stderr
        assert "resume with: swarm-tui resume" in resumed.stderr
        assert not (run_dir / "results.jsonl").exists(), "the first session's 39 lines must not look current"
        assert not (run_dir / "summary.json").exists()
        again = run_cli("resume", str(run_dir), "--headless")  # nothing left to send: the outputs are written
        assert again.returncode == 0, again.stderr
        assert len(read_jsonl(run_dir / "results.jsonl")) == 40 and read_jsonl(run_dir / "errors.jsonl") == []
    finally:
        server.stop()


def test_outputs_in_the_way_of_a_resume_are_refused_before_anything_is_sent(tmp_path, sim):
    job = write_batch(tmp_path / "job.jsonl", ["a", "b [[sim:500]]"])
    run_dir = tmp_path / "run"
    assert (
        run_cli(
            "run", str(job), "--headless", "--base-url", sim.base_url, "--out", str(run_dir), "--max-attempts", "1"
        ).returncode
        == 1
    )
    (run_dir / "results.jsonl").unlink()
    (run_dir / "results.jsonl").mkdir()  # something that cannot be replaced
    (run_dir / "results.jsonl" / "x").write_text("x")
    sent = sim.stats()["requests"]
    result = run_cli("resume", str(run_dir), "--headless", "--retry-failed")
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert f"{run_dir / 'results.jsonl'}: run directory: cannot remove the previous session's output" in result.stderr
    assert sim.stats()["requests"] == sent, "nothing sent"


async def test_the_tui_and_headless_say_1_when_the_outputs_were_not_written(tmp_path, sim):
    session = open_session(tmp_path, sim.base_url, ["a", "b"])
    blocker = tmp_path / "run" / "summary.json"
    blocker.mkdir()
    (blocker / "x").write_text("x")  # summary.json cannot be moved into place
    source = LiveRun(session)
    finished = await run_session(session)
    assert finished.succeeded == 2 and not finished.failed
    assert session.output_error is not None and "summary.json" in session.output_error
    assert exit_code(finished, session.output_error) == 1
    assert source.exit_code() == 1, "the TUI's exit code follows the same rule"
    assert exit_code(finished) == 0


def test_resume_with_model_sends_that_model_and_journals_it(tmp_path):
    server = ByteHostileServer().start()
    try:
        prompts = [f"t{i}" for i in range(4)] + ["once [[hostile:noretryx1]]"]  # a 503 not retried
        job = write_batch(tmp_path / "job.jsonl", prompts, model="first-model")
        run_dir = tmp_path / "run"
        first = run_cli("run", str(job), "--headless", "--base-url", server.base_url, "--out", str(run_dir))
        assert first.returncode == 1, first.stderr
        resumed = run_cli("resume", str(run_dir), "--headless", "--retry-failed", "--model", "second-model")
        assert resumed.returncode == 0, resumed.stderr
        results = read_jsonl(run_dir / "results.jsonl")
        models = {line["custom_id"]: line["response"]["body"]["model"] for line in results}
        # the model each answer names is the model the server was asked for
        assert models == {**{f"task-{i:04d}": "first-model" for i in range(4)}, "task-0004": "second-model"}
        db = sqlite3.connect(f"file:{run_dir / 'journal.sqlite'}?mode=ro", uri=True)
        try:
            bodies = {idx: json.loads(body)["model"] for idx, body in db.execute("SELECT idx, body FROM tasks")}
            plan = json.loads(db.execute("SELECT value FROM meta WHERE key = 'plan'").fetchone()[0])
        finally:
            db.close()
        assert bodies == {**dict.fromkeys(range(4), "first-model"), 4: "second-model"}
        assert plan["profile"]["model"] == "second-model", "a later resume goes on with it"
        assert plan["profile"]["base_url"] == server.base_url
    finally:
        server.stop()
