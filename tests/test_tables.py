"""Tables in and out: a CSV, Parquet, record JSONL or dataset directory run as a job on the
simulator (the real CLI, on loopback), and `swarm-tui export --format` giving every row back, in
order, with its answer; bad tables refused with file, row and column, nothing sent."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from swarm_tui.core.errors import InputError
from swarm_tui.jobs import TableSpec, load_job
from swarm_tui.journal import Journal

from tests.conftest import read_jsonl, run_cli, write_batch
from tests.test_job_scale import peak_of

PRODUCTS = ("billing", "app", "web")


def tickets(n: int) -> dict[str, list]:
    """A support desk's tickets: ids that look like numbers, text with commas, quotes, a line
    break and non-ASCII, and columns of several types."""
    return {
        "ticket_id": [f"{i:06d}" for i in range(n)],
        "text": [f'Invoice #{i}, "charged twice"\nplease help — {"é" * (i % 3)}' for i in range(n)],
        "product": [PRODUCTS[i % 3] for i in range(n)],
        "priority": [i % 5 for i in range(n)],
        "score": [i / 7 for i in range(n)],
        "vip": [i % 11 == 0 for i in range(n)],
    }


def write_csv(path: Path, columns: dict[str, list]) -> Path:
    names = list(columns)
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(names)
        writer.writerows(zip(*(columns[name] for name in names), strict=True))
    return path


def run_table(job: Path, run_dir: Path, sim, *template: str) -> None:
    result = run_cli(
        "run", str(job), *template, "--headless", "--out", str(run_dir),
        "--base-url", sim.base_url, "--model", "sim-1", "--concurrency", "64", "--log-every", "60",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]


def export(run_dir: Path, fmt: str, *more: str) -> str:
    result = run_cli("export", str(run_dir), "--format", fmt, *more)
    assert result.returncode == 0, result.stderr
    return result.stdout


def answers_by_id(run_dir: Path) -> dict[str, str]:
    return {
        line["custom_id"]: line["response"]["body"]["choices"][0]["message"]["content"]
        for line in read_jsonl(run_dir / "results.jsonl")
    }


ANSWER_COLUMNS = [
    "custom_id", "answer", "status", "error_class", "error_message", "prompt_tokens", "completion_tokens",
    "cached_tokens", "cost_usd", "latency_ms", "endpoint", "attempts",
]  # fmt: skip


def test_a_1000_row_parquet_runs_and_exports_every_row_in_order_with_its_answer(tmp_path, sim):
    columns = tickets(1000)
    job = tmp_path / "tickets.parquet"
    pq.write_table(pa.table(columns), job)
    run_dir = tmp_path / "run"
    run_table(job, run_dir, sim, "--prompt", "Classify this {product} ticket: {text}", "--id", "{ticket_id}")

    said = export(run_dir, "parquet")
    table = pq.read_table(run_dir / "answers.parquet")
    assert "1,000 rows" in said and str(run_dir / "answers.parquet") in said
    assert table.num_rows == 1000
    assert table.column_names == [*columns, *ANSWER_COLUMNS]
    for name, values in columns.items():  # every input column, in input order, with its own type
        assert table.column(name).to_pylist() == values, name
    assert table.schema.field("priority").type == pa.int64() and table.schema.field("vip").type == pa.bool_()
    rows = table.to_pylist()
    answers = answers_by_id(run_dir)
    assert [row["custom_id"] for row in rows] == columns["ticket_id"]
    assert all(row["status"] == "succeeded" and row["answer"] == answers[row["custom_id"]] for row in rows)
    assert all(row["latency_ms"] > 0 and row["endpoint"] and row["attempts"] >= 1 for row in rows)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert sum(row["attempts"] for row in rows) == summary["requests"]["sent"]
    assert sum(row["prompt_tokens"] for row in rows) == summary["tokens"]["prompt"]
    assert sum(row["completion_tokens"] for row in rows) == summary["tokens"]["completion"]
    assert rows[7]["answer"].startswith("Sim answer to: Classify this app ticket: Invoice #7")  # the template's prompt


def test_a_1000_row_csv_with_templates_runs_and_exports_its_rows_as_they_were_written(tmp_path, sim):
    columns = {k: [str(v) for v in values] for k, values in tickets(1000).items()}
    job = write_csv(tmp_path / "tickets.csv", columns)
    run_dir = tmp_path / "run"
    run_table(
        job, run_dir, sim,
        "--prompt", "Classify: {text}", "--system", "You sort {product} tickets (priority {priority}).",
        "--id", "T{ticket_id}",
    )  # fmt: skip

    journal = Journal.open(run_dir, readonly=True)
    try:
        messages = journal.queries.body_of(4)["messages"]
    finally:
        journal.close()
    assert messages == [
        {"role": "system", "content": "You sort app tickets (priority 4)."},
        {"role": "user", "content": f"Classify: {columns['text'][4]}"},
    ]

    export(run_dir, "csv", "-o", str(tmp_path / "answered.csv"))
    with (tmp_path / "answered.csv").open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 1000
    assert list(rows[0]) == [*columns, *ANSWER_COLUMNS]
    for name, values in columns.items():  # the text as written: "000123" stays "000123"
        assert [row[name] for row in rows] == values, name
    answers = answers_by_id(run_dir)
    assert [row["custom_id"] for row in rows] == [f"T{i}" for i in columns["ticket_id"]]
    assert all(row["answer"] == answers[row["custom_id"]] and row["status"] == "succeeded" for row in rows)


def test_a_record_jsonl_and_a_dataset_directory_are_tables_too(tmp_path, sim):
    records = tmp_path / "notes.jsonl"
    lines = [{"id": i, "note": f"note {i}", "tags": ["a", "b"][: i % 3], "extra": None} for i in range(20)]
    records.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    run_table(records, tmp_path / "records", sim, "--prompt", "Summarise {note} ({tags})", "--id", "n{id}")
    out = read_jsonl(Path(export(tmp_path / "records", "jsonl").split(": ")[-1].strip()))
    assert [row["id"] for row in out] == list(range(20))
    assert out[4]["tags"] == '["a"]' and out[4]["custom_id"] == "n4" and out[4]["status"] == "succeeded"

    datasets = pytest.importorskip("datasets")  # the test extra installs it: the layout is the library's own
    saved = tmp_path / "tickets-ds"
    datasets.Dataset.from_dict(tickets(30)).save_to_disk(str(saved))
    run_table(saved, tmp_path / "ds", sim, "--prompt", "Classify: {text}", "--id", "{ticket_id}")
    table = pq.read_table(Path(export(tmp_path / "ds", "parquet").split(": ")[-1].strip()))
    assert table.column("ticket_id").to_pylist() == tickets(30)["ticket_id"]
    assert table.column("status").to_pylist() == ["succeeded"] * 30


def test_a_dataset_dict_directory_names_its_splits(tmp_path):
    datasets = pytest.importorskip("datasets")
    saved = tmp_path / "dd"
    part = datasets.Dataset.from_dict(tickets(3))
    datasets.DatasetDict({"train": part, "test": part}).save_to_disk(str(saved))
    with pytest.raises(InputError) as refused:
        load_job(saved, model_override="m", table=TableSpec("{text}"))
    assert "holds several splits: name one" in str(refused.value) and str(saved / "train") in str(refused.value)
    assert len(load_job(saved / "train", model_override="m", table=TableSpec("{text}")).tasks) == 3


def test_a_toml_job_reads_its_tasks_from_a_table_and_the_export_parses_checked_answers(tmp_path, sim):
    pq.write_table(pa.table(tickets(12)), tmp_path / "tickets.parquet")
    job = tmp_path / "triage.toml"
    job.write_text(
        'name = "triage"\nmodel = "sim-1"\nsystem = "You triage {product} tickets."\n'
        "[request]\nmax_tokens = 64\n"
        '[tasks]\nfrom = "tickets.parquet"\nprompt = "Classify: {text}"\nid = "{ticket_id}"\n'
        "[workers]\njson = true\n",
        encoding="utf-8",
    )
    run_dir = tmp_path / "run"
    result = run_cli("run", str(job), "--headless", "--out", str(run_dir), "--base-url", sim.base_url)
    assert result.returncode == 0, result.stderr[-2000:]
    export(run_dir, "jsonl")
    rows = read_jsonl(run_dir / "answers.jsonl")
    assert [row["ticket_id"] for row in rows] == tickets(12)["ticket_id"]
    parsed = json.loads(rows[0]["answer"])  # the simulator answers JSON when asked for it
    assert list(parsed) == ["answer", "confidence", "findings"]
    names = list(rows[0])  # each field of the checked answer, a column of its own after the answer
    assert names[names.index("answer") + 1 : names.index("status")] == ["answer_swarm", "confidence", "findings"]
    for row in rows:
        answer = json.loads(row["answer"])
        assert row["answer_swarm"] == answer["answer"]  # its "answer" field, beside the answer itself
        assert row["confidence"] == answer["confidence"] and json.loads(row["findings"]) == answer["findings"]


def test_an_answer_column_never_takes_the_place_of_an_input_column(tmp_path, sim):
    columns = {"id": ["a", "b"], "answer": ["yes", "no"], "status": ["open", "closed"], "answer_swarm": ["x", "y"]}
    job = write_csv(tmp_path / "clash.csv", columns)
    run_table(job, tmp_path / "run", sim, "--prompt", "Was {answer} right?", "--id", "{id}")
    export(tmp_path / "run", "jsonl")
    rows = read_jsonl(tmp_path / "run" / "answers.jsonl")
    assert [(row["answer"], row["status"], row["answer_swarm"]) for row in rows] == [
        ("yes", "open", "x"),
        ("no", "closed", "y"),
    ]
    assert all(row["status_swarm"] == "succeeded" and row["answer_swarm_swarm"].startswith("Sim") for row in rows)


def test_a_batch_jsonl_job_exports_the_same_columns_from_its_bodies(tmp_path, sim):
    job = write_batch(tmp_path / "batch.jsonl", ["first question", "second question"])
    result = run_cli("run", str(job), "--headless", "--out", str(tmp_path / "run"), "--base-url", sim.base_url)
    assert result.returncode == 0, result.stderr
    export(tmp_path / "run", "csv")
    with (tmp_path / "run" / "answers.csv").open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["custom_id", "prompt", *ANSWER_COLUMNS[1:]]
    assert [(row["custom_id"], row["prompt"], row["status"]) for row in rows] == [
        ("task-0000", "first question", "succeeded"),
        ("task-0001", "second question", "succeeded"),
    ]


def test_a_big_table_is_checked_whole_but_holds_none_of_its_rows(tmp_path):
    """Loading a 50,000-row Parquet job renders and checks every row, then keeps nothing of them
    (a hash per id): a small part of what its tasks hold once built."""
    columns = tickets(50_000)
    path = tmp_path / "big.parquet"
    pq.write_table(pa.table(columns), path)
    spec = TableSpec("Classify: {text}", "You sort {product} tickets.", "{ticket_id}")
    held = peak_of(lambda: list(load_job(path, model_override="m", table=spec).tasks))
    assert peak_of(lambda: load_job(path, model_override="m", table=spec)) < held / 4, "loading held the rows"


# ----------------------------------------------------------------- bad tables


def _bad_csv(tmp_path: Path, rows: list[list[str]]) -> Path:
    return write_csv(tmp_path / "tickets.csv", {"ticket_id": [r[0] for r in rows], "text": [r[1] for r in rows]})


def _not_utf8(tmp_path: Path) -> Path:
    path = tmp_path / "tickets.csv"
    path.write_bytes(b"ticket_id,text\nT1,fine\nT2,caf\xe9 au lait\n")
    return path


def _not_parquet(tmp_path: Path) -> Path:
    path = tmp_path / "tickets.parquet"
    path.write_text("ticket_id,text\nT1,this is a CSV\n", encoding="utf-8")
    return path


def _record_without_text(tmp_path: Path) -> Path:
    path = tmp_path / "tickets.jsonl"
    path.write_text('{"ticket_id": "T1", "text": "ok"}\n\n{"ticket_id": "T2"}\n', encoding="utf-8")
    return path


BAD_TABLES = {
    "a missing column": (
        lambda tmp: _bad_csv(tmp, [["T1", "a"], ["T2", "b"]]),
        ["--prompt", "Classify: {body}"],
        "tickets.csv:1: body: no such column ",
    ),
    "an empty prompt": (
        lambda tmp: _bad_csv(tmp, [["T1", "a"], ["T2", ""], ["T3", "c"]]),
        ["--prompt", "Classify: {text}"],
        "tickets.csv:3: text: empty prompt",
    ),
    "a duplicate id": (
        lambda tmp: _bad_csv(tmp, [["T1", "a"], ["T2", "b"], ["T1", "c"]]),
        ["--prompt", "{text}", "--id", "{ticket_id}"],
        "tickets.csv:4: ticket_id: duplicate id 'T1' (first in row 2)",
    ),
    "bad encoding in a CSV": (_not_utf8, ["--prompt", "{text}"], "tickets.csv:3: text: not UTF-8 text: byte 0xe9"),
    "a .parquet that is not one": (
        _not_parquet,
        ["--prompt", "{text}"],
        "tickets.parquet: parquet: not a Parquet file",
    ),
    "a record without the column": (
        _record_without_text,
        ["--prompt", "{text}"],
        "tickets.jsonl:3: text: this record has no 'text'",
    ),
}


@pytest.mark.parametrize("case", list(BAD_TABLES))
def test_a_bad_table_is_refused_with_file_row_and_column_and_nothing_is_sent(tmp_path, sim, case):
    make, template, said = BAD_TABLES[case]
    job = make(tmp_path)
    run_dir = tmp_path / "run"
    result = run_cli(
        "run", str(job), *template, "--headless", "--out", str(run_dir), "--base-url", sim.base_url, "--model", "m"
    )
    assert result.returncode == 2, result.stderr
    assert said in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert sim.stats()["requests"] == 0
    assert not (run_dir / "journal.sqlite").exists()


def test_a_toml_jobs_table_is_checked_the_same_way(tmp_path, sim):
    _bad_csv(tmp_path, [["T1", "a"], ["T2", ""]])
    job = tmp_path / "job.toml"
    job.write_text('model = "m"\n[tasks]\nfrom = "tickets.csv"\nprompt = "Classify: {text}"\n', encoding="utf-8")
    result = run_cli("run", str(job), "--headless", "--out", str(tmp_path / "run"), "--base-url", sim.base_url)
    assert result.returncode == 2
    assert "tickets.csv:3: text: empty prompt: tasks.prompt 'Classify: {text}'" in result.stderr
    assert sim.stats()["requests"] == 0


def test_a_table_without_a_prompt_says_what_to_give_and_a_batch_job_refuses_one(tmp_path):
    table = _bad_csv(tmp_path, [["T1", "a"]])
    with pytest.raises(InputError, match=r"--prompt: a table: say what to ask of each row.*columns: ticket_id, text"):
        load_job(table, model_override="m")
    batch = write_batch(tmp_path / "batch.jsonl", ["hi"])
    with pytest.raises(InputError, match="--prompt makes a table's rows into tasks; batch.jsonl is a Batch JSONL"):
        load_job(batch, table=TableSpec("{text}"))
