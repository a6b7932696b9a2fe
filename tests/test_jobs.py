"""Job files are validated whole before anything is sent; problems name file, line and field."""

from __future__ import annotations

import json

import pytest
from swarm_tui.core.errors import InputError
from swarm_tui.jobs import load_job
from swarm_tui.util.locations import bundled, demo_job

from tests.conftest import run_cli, write_batch


def test_demo_job_is_the_articles_100_agent_swarm():
    job = load_job(demo_job())
    assert len(job.tasks) == 100
    first, last = job.tasks[0], job.tasks[-1]
    assert first.custom_id == "agent-001" and last.custom_id == "agent-100"
    assert first.prompt == "タスク#1を実行" and last.prompt == "タスク#100を実行"
    messages = first.body["messages"]
    # the shared context goes first and is identical for every agent (prefix caches hit)
    assert messages[0] == job.tasks[57].body["messages"][0]
    assert messages[1]["content"] == "You are sub-agent #1 of swarm/100."
    assert first.body["max_tokens"] == 2048
    assert first.body["extra_body"] == {"swarm_id": "swarm-100-v1"}


def test_every_sample_job_loads():
    jobs = sorted(bundled("sample_jobs").glob("*.toml")) + sorted(bundled("sample_jobs").glob("*.jsonl"))
    assert jobs
    for path in jobs:
        job = load_job(path)
        assert job.tasks or (job.swarm and job.swarm.plan), path


def test_batch_jsonl_reports_every_broken_line(tmp_path):
    path = write_batch(tmp_path / "job.jsonl", ["a", "b", "c", "d"])
    lines = path.read_text().splitlines()
    lines[1] = lines[1][:-5]  # truncated JSON
    bad_role = json.loads(lines[2])
    bad_role["body"]["messages"][0]["role"] = "robot"
    lines[2] = json.dumps(bad_role)
    lines[3] = lines[0]  # duplicate custom_id
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as caught:
        load_job(path)
    text = str(caught.value)
    assert f"{path}:2: json:" in text
    assert f"{path}:3: body.messages[0].role: unknown role 'robot'" in text
    assert f"{path}:4: custom_id: duplicate 'task-0000' (first on line 1)" in text
    assert len(caught.value.problems) == 3


def test_batch_model_override_replaces_each_body_model(tmp_path):
    path = write_batch(tmp_path / "job.jsonl", ["a", "b"], model="gpt-4.1")
    assert {t.body["model"] for t in load_job(path).tasks} == {"gpt-4.1"}
    assert {t.body["model"] for t in load_job(path, model_override="kimi-k2.5").tasks} == {"kimi-k2.5"}


def test_batch_without_model_needs_an_override(tmp_path):
    path = tmp_path / "job.jsonl"
    path.write_text(json.dumps({"custom_id": "x", "body": {"messages": [{"role": "user", "content": "hi"}]}}) + "\n")
    with pytest.raises(InputError, match=r"job.jsonl:1: body.model: missing"):
        load_job(path)
    assert load_job(path, model_override="m").tasks[0].body["model"] == "m"


def test_toml_syntax_error_names_the_line(tmp_path):
    path = tmp_path / "job.toml"
    path.write_text('name = "x"\nmodel = "m"\n[tasks]\ncount = = 3\n')
    with pytest.raises(InputError, match=r"job.toml:4: toml:"):
        load_job(path)


def test_toml_semantic_errors_name_field_and_line(tmp_path):
    path = tmp_path / "job.toml"
    path.write_text(
        'name = "x"\nmodel = "m"\n\n[request]\nmax_tokens = 0\nwarp = 9\n\n[tasks]\ncount = 3\nprompt = "do {nope}"\n'
    )
    with pytest.raises(InputError) as caught:
        load_job(path)
    text = str(caught.value)
    assert f"{path}:5: request.max_tokens: must be a positive integer" in text
    assert f"{path}:6: request.warp: unknown request parameter" in text
    assert f"{path}:10: tasks.prompt: bad template 'do {{nope}}'" in text


def test_toml_task_list_and_context_file(tmp_path):
    (tmp_path / "brief.md").write_text("SHARED BRIEF")
    path = tmp_path / "job.toml"
    path.write_text(
        'model = "m"\nsystem = "agent {agent}/{total}"\n[context]\nfile = "brief.md"\n'
        '[[task]]\nid = "one"\nprompt = "first"\n[[task]]\nid = "two"\nprompt = "second"\n'
    )
    job = load_job(path)
    assert [t.custom_id for t in job.tasks] == ["one", "two"]
    assert job.tasks[1].body["messages"] == [
        {"role": "system", "content": "SHARED BRIEF"},
        {"role": "system", "content": "agent 2/2"},
        {"role": "user", "content": "second"},
    ]


def test_cli_broken_job_exits_2_and_sends_nothing(tmp_path, sim):
    path = write_batch(tmp_path / "job.jsonl", [f"task {i}" for i in range(50)])
    lines = path.read_text().splitlines()
    lines[37] = lines[37].replace('"messages"', '"mesages"')
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "run"
    result = run_cli("run", str(path), "--headless", "--base-url", sim.base_url, "--out", str(out))
    assert result.returncode == 2, result.stderr
    assert f"{path}:38: body.messages: missing or empty list" in result.stderr
    assert sim.stats()["requests"] == 0
    assert not out.exists()


def test_cli_missing_key_names_the_env_var_and_sends_nothing(tmp_path):
    path = write_batch(tmp_path / "job.jsonl", ["a"])
    result = run_cli(
        "run",
        str(path),
        "--headless",
        "--base-url",
        "https://relay.example.invalid/v1",
        "--api-key-env",
        "RELAY_KEY_FOR_TEST",
        "--out",
        str(tmp_path / "run"),
    )
    assert result.returncode == 2
    assert "RELAY_KEY_FOR_TEST is not set" in result.stderr
    assert not (tmp_path / "run").exists()
