"""Jobs of any size: a big job loads whole and its problems still name the right file, line and
field; the live latency percentiles stay exact however many answers arrive. Correctness only:
the times and memory are measured by benchmarks/bench_jobs.py."""

from __future__ import annotations

import bisect
import json
import random
import tracemalloc

import pytest
from swarm_tui.core.errors import InputError
from swarm_tui.core.events import Attempt, TaskSucceeded
from swarm_tui.engine.stats import RunStats, SortedLatencies, latency_summary, nearest_rank
from swarm_tui.jobs import MAX_PROBLEMS, load_job

ENTRIES = 2000


def _task_entries(n: int, prompt=lambda i: f'prompt = "task {i}"') -> list[str]:
    lines = ['name = "big"', 'model = "sim-1"', 'system = "You are sub-agent #{agent} of swarm/{total}."', ""]
    for i in range(n):
        lines += ["[[task]]", f'id = "t{i}"', prompt(i), ""]
    return lines


def test_a_2000_entry_toml_job_names_the_line_of_each_problem(tmp_path):
    bad = {0: "promt = 'typo'", 999: "prompt = 5", 1500: 'prompt = "{agnet}"', ENTRIES - 1: "prompt = true"}
    lines = _task_entries(ENTRIES, lambda i: bad.get(i, f'prompt = "task {i}"'))
    path = tmp_path / "big.toml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as caught:
        load_job(path)

    def line(i: int) -> int:  # entry i's `[[task]]` header, then its id, then its prompt
        return 5 + 4 * i

    got = [(p.line, p.field, p.message) for p in caught.value.problems]
    assert got[:4] == [
        (line(0) + 2, "task[0].promt", "unknown key, did you mean 'prompt'?"),
        (line(0), "task[0].prompt", "missing"),
        (line(999) + 2, "task[999].prompt", "must be a string, not int"),
        (line(ENTRIES - 1) + 2, f"task[{ENTRIES - 1}].prompt", "must be a string, not bool"),
    ]
    assert all(p.source == str(path) for p in caught.value.problems)
    assert lines[line(999) + 2 - 1] == "prompt = 5"
    # a bad template is reported once the entries are valid, on its own line
    del bad[0], bad[999], bad[ENTRIES - 1]
    path.write_text("\n".join(_task_entries(ENTRIES, lambda i: bad.get(i, f'prompt = "task {i}"'))) + "\n")
    with pytest.raises(InputError) as caught:
        load_job(path)
    [problem] = caught.value.problems
    assert (problem.line, problem.field) == (line(1500) + 2, "task[1500].prompt")


def test_a_2000_entry_toml_job_loads_in_order(tmp_path):
    path = tmp_path / "big.toml"
    path.write_text("\n".join(_task_entries(ENTRIES)) + "\n")
    job = load_job(path)
    assert [t.custom_id for t in job.tasks] == [f"t{i}" for i in range(ENTRIES)]
    assert job.tasks[-1].prompt == f"task {ENTRIES - 1}"
    assert job.tasks[-1].body["messages"][0]["content"] == f"You are sub-agent #{ENTRIES} of swarm/{ENTRIES}."


def test_a_100000_task_count_job_shares_what_every_agent_is_sent(tmp_path):
    path = tmp_path / "count.toml"
    path.write_text(
        'name = "c"\nmodel = "sim-1"\ncontext = "shared prefix"\nsystem = "static system"\n'
        '[tasks]\ncount = 100000\nprompt = "task #{agent} of {total}"\n'
    )
    job = load_job(path)
    assert len(job.tasks) == 100_000
    first, last = job.tasks[0], job.tasks[-1]
    assert first.custom_id == "agent-000001" and last.custom_id == "agent-100000"
    assert last.prompt == "task #100000 of 100000"
    assert last.body["messages"][:2] == [
        {"role": "system", "content": "shared prefix"},
        {"role": "system", "content": "static system"},
    ]
    # one object for every task, not 100,000 copies; a body is never changed in place
    assert first.body["messages"][0] is last.body["messages"][0]
    assert first.body["messages"][1] is last.body["messages"][1]
    assert job.template is not None
    assert job.template.body("p", agent=3, total=9)["messages"][0] is first.body["messages"][0]


def peak_of(load) -> int:
    """tracemalloc's peak while `load()` runs."""
    tracemalloc.start()
    try:
        load()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_count_job_is_checked_whole_but_holds_none_of_its_bodies(tmp_path):
    """Issue 32: a TOML `count` job renders and checks every id and prompt as it loads, holding a
    hash of each id; its tasks are built when read (a new run's journal takes them as they are),
    so loading it holds a small part of what its tasks hold (tracemalloc's peak), and an id
    template that repeats is still refused naming the first two agents that share an id."""
    path = tmp_path / "count.toml"
    prompt = "task {agent} " + "x" * 300
    path.write_text(f'name = "c"\nmodel = "m"\n[tasks]\ncount = 20000\nprompt = "{prompt}"\n')

    load_job(path)  # the imports and caches, not measured
    held = peak_of(lambda: list(load_job(path).tasks))
    assert peak_of(lambda: load_job(path)) < held / 4, "loading the count job held its tasks"
    job = load_job(path)
    assert (len(job.tasks), job.tasks[-1].custom_id, job.tasks[19_999].prompt[:10]) == (
        20_000,
        "agent-20000",
        "task 20000",
    )
    with pytest.raises(IndexError):
        job.tasks[20_000]
    path.write_text('name = "c"\nmodel = "m"\n[tasks]\ncount = 300\nid = "a-{agent:03}-{index:03}"\nprompt = "p"\n')
    assert len(load_job(path).tasks) == 300
    path.write_text('name = "c"\nmodel = "m"\n[tasks]\ncount = 300\nid = "a-{total}"\nprompt = "p"\n')
    with pytest.raises(InputError, match="gives agents 1 and 2 the same id 'a-300'"):
        load_job(path)


def test_a_templated_system_prompt_is_rendered_per_agent(tmp_path):
    path = tmp_path / "count.toml"
    path.write_text('name = "c"\nmodel = "m"\nsystem = "#{agent} {{x}}"\n[tasks]\ncount = 2\nprompt = "p"\n')
    first, second = load_job(path).tasks
    assert first.body["messages"][0]["content"] == "#1 {x}" and second.body["messages"][0]["content"] == "#2 {x}"


def _batch_line(i: int, system: str = "You are a careful sub-agent.", **extra) -> str:
    messages = [{"role": "system", "content": system}, {"role": "user", "content": f"task {i}"}]
    return json.dumps({"custom_id": f"t{i}", "body": {"model": "sim-1", "messages": messages, **extra}})


def test_a_big_batch_job_keeps_one_copy_of_its_shared_prompt(tmp_path):
    path = tmp_path / "big.jsonl"
    path.write_text("\n".join(_batch_line(i, system="other" if i == 7 else "shared") for i in range(20_000)) + "\n")
    job = load_job(path)
    assert len(job.tasks) == 20_000
    systems = [t.body["messages"][0] for t in job.tasks]
    assert systems[0] is systems[-1] and systems[7] == {"role": "system", "content": "other"}
    assert all(t.body["messages"][1]["content"] == f"task {t.index}" for t in job.tasks)
    # the bodies are what the lines say, with the model override applied to a copy
    assert job.tasks[5].body == json.loads(_batch_line(5, system="shared"))["body"]
    over = list(load_job(path, model_override="m2").tasks)  # one read of the file: its tasks share the prompt
    assert over[5].body["model"] == "m2" and over[5].body["messages"][0] is over[0].body["messages"][0]


def test_a_big_batch_job_is_checked_and_refused_without_holding_its_bodies(tmp_path):
    """Issue 32: every line is checked holding a hash of each id, so a job whose last line is bad
    is refused in a few bytes a line (a 1 GB job held 5.4 GB of bodies before saying so), and a
    good job's tasks are not built by loading it: they are read from the file when gone through
    (a new run's journal takes them as they are read). Judged against holding the same job's
    tasks, measured the same way (tracemalloc's peak)."""
    n = 20_000
    good = "\n".join(_batch_line(i, system=f"system prompt of task {i} " * 8) for i in range(n)) + "\n"
    valid, bad = tmp_path / "valid.jsonl", tmp_path / "bad.jsonl"
    valid.write_text(good)
    bad.write_text(good + json.dumps({"custom_id": "last", "body": {"model": "m", "messages": "hi"}}) + "\n")

    def refused() -> None:
        with pytest.raises(InputError) as caught:
            load_job(bad)
        assert str(caught.value) == f"{bad}:{n + 1}: body.messages: missing or empty list"

    held = peak_of(lambda: list(load_job(valid).tasks))
    assert peak_of(refused) < held / 4, "the bad job's bodies were held before it was refused"
    assert peak_of(lambda: load_job(valid)) < held / 4, "loading the good job held its bodies"


def test_a_batch_jobs_tasks_are_read_from_its_file_which_must_not_change_meanwhile(tmp_path):
    path = tmp_path / "job.jsonl"
    path.write_text("\n".join(_batch_line(i) for i in range(50)) + "\n")
    job = load_job(path)
    assert [t.custom_id for t in job.tasks] == [f"t{i}" for i in range(50)]
    assert (job.tasks[-1].custom_id, job.tasks[3].prompt, len(job.tasks[10:13])) == ("t49", "task 3", 3)
    for changed in ("\n".join(_batch_line(i) for i in range(49)), "\n".join(_batch_line(i) for i in range(51))):
        path.write_text(changed + "\n")
        with pytest.raises(InputError, match="changed while it was read"):
            list(job.tasks)


def test_a_batch_job_past_the_problem_cap_still_reports_a_bad_byte_below(tmp_path):
    path = tmp_path / "bad.jsonl"
    lines = [b"{not json" for _ in range(MAX_PROBLEMS + 5)] + [_batch_line(1).encode(), b'{"x": "caf\xe9"}']
    path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(InputError) as caught:
        load_job(path)
    [problem] = caught.value.problems
    assert (problem.line, problem.field) == (MAX_PROBLEMS + 7, "encoding")
    assert "byte 0xe9 at column 11 (invalid continuation byte)" in problem.message


def test_a_role_that_is_not_a_string_is_a_problem_not_a_crash(tmp_path):
    path = tmp_path / "role.jsonl"
    body = {"model": "m", "messages": [{"role": ["user"], "content": "x"}]}
    path.write_text(json.dumps({"custom_id": "a", "body": body}) + "\n")
    with pytest.raises(InputError) as caught:
        load_job(path)
    assert str(caught.value) == f"{path}:1: body.messages[0].role: unknown role ['user']"


# --------------------------------------------------------------------------- percentiles


@pytest.mark.parametrize("n", [0, 1, 2, 7, SortedLatencies.LOAD * 2 + 1, 20_000])
def test_sorted_latencies_read_as_the_sorted_list_insort_kept(n):
    rng = random.Random(n)
    kept, reference = SortedLatencies(), []
    for i in range(n):
        value = rng.choice([rng.lognormvariate(5, 1), 100.0, float(rng.randint(0, 40)), float(i)])
        kept.add(value)
        bisect.insort(reference, value)
        if i % 101 == 0:  # reads between adds see every add (the size index is kept up to date)
            assert kept[i // 3] == reference[i // 3] and kept[-1] == reference[-1]
    assert len(kept) == n and list(kept) == reference and kept == reference
    assert [kept[i] for i in range(0, n, 97)] == reference[::97]
    assert kept[1:5] == reference[1:5]
    if n:
        assert kept[-1] == reference[-1] and kept[0] == reference[0]
    for q in (0.0, 0.2, 0.5, 0.95, 0.99, 1.0):
        assert nearest_rank(kept, q) == nearest_rank(reference, q)
    assert latency_summary(kept) == latency_summary(reference)
    with pytest.raises(IndexError):
        kept[n]


def test_sorted_latencies_replaced_whole():
    kept = SortedLatencies([3.0, 1.0])
    kept[:] = [5.0, 2.0, 4.0]
    assert list(kept) == [2.0, 4.0, 5.0]
    kept.add(3.0)
    assert list(kept) == [2.0, 3.0, 4.0, 5.0]
    with pytest.raises(TypeError):
        kept[1:] = [1.0]  # type: ignore[index]


def test_run_stats_percentiles_are_exact():
    stats = RunStats(clock=lambda: 0.0)
    values = [float(v) for v in random.Random(3).sample(range(1, 10_001), 5000)]
    for i, latency in enumerate(values):
        stats.observe(TaskSucceeded(Attempt(i, 1, "http://sim/v1", 0.0, latency, "ok"), ""))
    ordered = sorted(values)
    assert list(stats.latencies_ms) == ordered
    for q in (0.5, 0.95, 0.99):
        assert stats.percentile(q) == ordered[round(q * (len(ordered) - 1))]


@pytest.mark.parametrize("duplicates", [False, True], ids=["bad-lines", "with-duplicates"])
def test_the_count_of_problems_past_those_shown_is_true(tmp_path, duplicates):
    """4,980 bad lines: the message lists the first ones and says how many more there are, the
    true number (it said "... and 30 more problems": the 50 collected, less the 20 shown)."""
    path = tmp_path / "bad.jsonl"
    lines = [b"{not json" for _ in range(4_980)]
    if duplicates:  # two lines far down repeat an id: each is one problem, "duplicate"
        lines += [_batch_line(1).encode(), _batch_line(1).encode(), _batch_line(1).encode()]
    path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(InputError) as caught:
        load_job(path)
    total = 4_980 + (2 if duplicates else 0)
    text = str(caught.value)
    shown = text.splitlines()
    assert len(shown) == 21 and shown[-1] == f"... and {total - 20:,} more problems", shown[-3:]
    assert len(caught.value.problems) <= MAX_PROBLEMS, "the problems kept stay bounded"
