"""The judge's parts that need no endpoint: reading verdicts, the drift rule, sampling, and the
`[judge]` table and `--judge*` options refused before anything is sent."""

from __future__ import annotations

import pytest
from swarm_tui.core.errors import InputError
from swarm_tui.jobs import load_job
from swarm_tui.jobs.judge_spec import JudgeSpec
from swarm_tui.judge.judge import sampled
from swarm_tui.judge.monitor import QualityMonitor
from swarm_tui.judge.verdict import VerdictError, read_preference, read_score

from tests.conftest import run_cli


@pytest.mark.parametrize(
    ("answer", "score"),
    [
        ('{"score": 7, "reason": "fine"}', 7.0),
        ('```json\n{"score": 9, "reason": "ok"}\n```', 9.0),
        ('Here you go: {"score": "8/10", "reason": "good"} hope it helps', 8.0),
        ('{"score": 6.5, "reason": "half"', 6.5),  # a truncated ending
    ],
)
def test_a_verdict_is_read_as_robustly_as_any_json_answer(answer, score):
    assert read_score(answer).score == score


@pytest.mark.parametrize(
    "answer",
    ["I would rate this a seven out of ten.", '{"score": 11, "reason": "x"}', '{"score": true}', '["7"]', ""],
)
def test_an_unreadable_verdict_says_so(answer):
    with pytest.raises(VerdictError):
        read_score(answer)


def test_a_pairwise_verdict():
    assert read_preference('{"better": "b", "reason": "more specific"}').better == "B"
    assert read_preference('{"better": "Equal", "reason": "same"}').better == "equal"
    with pytest.raises(VerdictError):
        read_preference('{"better": "C"}')


def test_the_drift_rule():
    """Baseline: the first 4 judged; then a full window of 3 more than the drop below fires once."""
    monitor = QualityMonitor(JudgeSpec(baseline=4, window=3, drop=1.5))
    fired = [monitor.observe(s) for s in (9, 8, 9, 8)]
    assert fired == [None] * 4 and monitor.baseline == 8.5
    assert monitor.observe(7) is None and monitor.observe(6) is None  # the window is not full yet
    drift = monitor.observe(6)  # rolling 6.33, 2.17 below 8.5
    assert drift is not None and drift.baseline == 8.5 and round(drift.rolling, 2) == 6.33
    assert monitor.observe(6) is None  # one drift fires once: the window starts over
    monitor.start_over()
    assert monitor.baseline is None


def test_a_drop_under_1_is_a_share_of_the_baseline():
    spec = JudgeSpec(drop=0.2)
    assert spec.allowed_drop(9.0) == pytest.approx(1.8)
    assert JudgeSpec(drop=2).allowed_drop(9.0) == 2


def test_a_small_dip_within_the_allowed_drop_fires_nothing():
    monitor = QualityMonitor(JudgeSpec(baseline=2, window=2, drop=1.5))
    assert [monitor.observe(s) for s in (9, 9, 8, 8, 8, 8)] == [None] * 6


def test_sampling_is_a_stable_share_of_the_ids():
    ids = [f"task-{i:05d}" for i in range(20_000)]
    chosen = [i for i in ids if sampled(i, 0.05)]
    assert 0.04 < len(chosen) / len(ids) < 0.06
    assert chosen == [i for i in ids if sampled(i, 0.05)]  # a resume samples the same answers
    assert not any(sampled(i, 0.0) for i in ids[:1000]) and all(sampled(i, 1.0) for i in ids[:1000])


def test_a_judge_table_with_mistakes_names_each_line_and_field(tmp_path):
    job = tmp_path / "job.toml"
    job.write_text(
        'name = "j"\nmodel = "sim-1"\n[tasks]\ncount = 2\nprompt = "p {agent}"\n'
        '[judge]\nrate = 1.5\naction = "panic"\nrubric_file = "missing.md"\nwindow = 0\ncolour = "red"\n'
    )
    with pytest.raises(InputError) as caught:
        load_job(job)
    problems = {(p.field, p.line) for p in caught.value.problems}
    assert ("judge.rate", 7) in problems and ("judge.action", 8) in problems
    assert ("judge.rubric_file", 9) in problems and ("judge.window", 10) in problems
    assert ("judge.colour", 11) in problems


def test_a_rubric_file_is_read_relative_to_the_job(tmp_path):
    (tmp_path / "rubric.md").write_text("Only cite primary sources.\n")
    job = tmp_path / "job.toml"
    job.write_text(
        'name = "j"\nmodel = "sim-1"\n[tasks]\ncount = 1\nprompt = "p"\n[judge]\nrubric_file = "rubric.md"\n'
    )
    assert load_job(job).judge == JudgeSpec(rubric="Only cite primary sources.")


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--judge", "self", "--judge-action", "flush_memory"], "flush_memory needs a multi-round swarm"),
        (["--judge", "self", "--judge-action", "failover"], "failover needs a fallback"),
        (["--judge-rate", "0.5"], "--judge-rate needs --judge"),
        (["--judge", "nosuchprofile"], "no profile named 'nosuchprofile'"),
    ],
)
def test_a_judge_that_cannot_work_is_refused_before_anything_is_sent(tmp_path, sim, extra, words):
    job = tmp_path / "job.toml"
    job.write_text('name = "j"\nmodel = "sim-1"\n[tasks]\ncount = 3\nprompt = "p {agent}"\n')
    result = run_cli("run", str(job), "--headless", "--base-url", sim.base_url, "--out", str(tmp_path / "run"), *extra)
    assert result.returncode == 2, result.stderr
    assert words in result.stderr
    assert not (tmp_path / "run").exists() and sim.stats()["requests"] == 0
