"""Outputs any reader accepts: every line of results.jsonl and errors.jsonl is strict
JSON (RFC 8259) in UTF-8, one line each, whatever bytes the provider's 200 held; an answer that
cannot be made so fails as an error of its own class, never a corrupt line.

The provider is a hostile server on loopback writing its answers byte by byte
(`tests/hostile_answers.py`); the outputs are read back by a strict reader, by `str.splitlines`,
and by jq itself when it is installed.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from swarm_tui.providers.answer import MAX_ANSWER_BYTES, NOT_PARSED, AnswerRefused, strict_answer, strict_body

from tests.conftest import run_cli, write_batch
from tests.hostile import completion
from tests.hostile_answers import ByteHostileServer, answer_bytes


@pytest.fixture
def byte_hostile():
    server = ByteHostileServer().start()
    yield server
    server.stop()


def _reject(name: str):
    raise ValueError(f"{name} is not JSON")


def _unique(pairs):
    value = dict(pairs)
    if len(value) != len(pairs):
        raise ValueError(f"duplicate keys in {pairs!r:.80}")
    return value


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def strict_lines(path: Path) -> list[dict]:
    """Each line of a JSON Lines file as a strict reader takes it: UTF-8 (no BOM), no NaN or
    Infinity, no duplicate keys, no lone surrogate, numbers a double holds, one line to
    `str.splitlines` as to a split on "\\n"."""
    data = path.read_bytes()
    text = data.decode("utf-8")  # strict: fails on a byte that is not UTF-8
    assert not text.startswith("\ufeff")
    lines = text.split("\n")
    assert lines[-1] == "", "ends with a newline"
    assert text.splitlines() == lines[:-1], "a line break inside a line (U+2028, U+0085...)"
    values = []
    for line in lines[:-1]:
        value = json.loads(line, parse_constant=_reject, object_pairs_hook=_unique)
        for s in _strings(value):
            s.encode("utf-8")  # a lone surrogate fails here
        values.append(value)
    return values


def assert_jq_reads(path: Path, count: int) -> None:
    if shutil.which("jq") is None:
        return
    done = subprocess.run(["jq", "-c", ".custom_id", str(path)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == count


FATES = ["bom", "nan", "dupkeys", "surrogate", "control", "lineseps", "hugenum", "bigusage", "utf16", "pretty"]


def test_every_answer_a_provider_sends_is_a_strict_json_line_of_results(tmp_path, byte_hostile):
    prompts = [f"t{i} [[hostile:{fate}]]" for i, fate in enumerate(FATES)]
    prompts += [
        "once not utf-8 [[hostile:notutf8x1]]",
        "always deep [[hostile:deep]]",
        "plain",
        "an error a strict reader chokes on [[hostile:errweird]]",
    ]
    job = write_batch(tmp_path / "job.jsonl", prompts)
    run_dir = tmp_path / "run"
    result = run_cli(
        "run", str(job), "--headless", "--base-url", byte_hostile.base_url, "--out", str(run_dir), "--max-attempts", "2"
    )
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and "Exception in callback" not in result.stderr, result.stderr

    results = {line["custom_id"]: line for line in strict_lines(run_dir / "results.jsonl")}
    errors = {line["custom_id"]: line for line in strict_lines(run_dir / "errors.jsonl")}
    assert_jq_reads(run_dir / "results.jsonl", len(results))
    assert_jq_reads(run_dir / "errors.jsonl", len(errors))
    assert len(results) == len(FATES) + 2 and set(errors) == {"task-0011", "task-0013"}

    def message(i: int) -> dict:
        return results[f"task-{i:04d}"]["response"]["body"]["choices"][0]["message"]

    for i, fate in enumerate(FATES):
        assert message(i)["content"].startswith(f"answer to t{i} "), fate  # the answer itself is kept
    body = {fate: results[f"task-{i:04d}"]["response"]["body"] for i, fate in enumerate(FATES)}
    assert body["nan"]["choices"][0]["logprobs"] == {"x": None, "y": None}  # as JSON.stringify writes them
    assert "decoy" not in message(FATES.index("dupkeys"))["content"]  # the last of the two, as every reader takes
    assert message(FATES.index("surrogate"))["content"].endswith(" \ufffd end")
    assert message(FATES.index("control"))["content"].endswith("\tand\nmore\x01")
    assert message(FATES.index("lineseps"))["content"].endswith(" a\u2028b\u2029c\u0085d")
    assert body["hugenum"]["created"] is None and body["hugenum"]["big"] is None
    assert body["bigusage"]["usage"]["prompt_tokens"] == 2**70  # kept as sent (an exact integer)...
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["tokens"]["prompt"] == 10 * (len(FATES) + 2 - 1)  # ...but not counted as 2**70 tokens

    assert message(10)["content"].startswith("answer to once")
    deep = errors["task-0011"]["error"]
    assert deep["code"] == "malformed_answer" and "nested deeper" in deep["message"]
    weird = errors["task-0013"]
    assert weird["error"]["message"] == "bad\u2028request\u0085 \ufffd \x00 end"  # escaped, not raw: one line
    assert weird["response"]["request_id"] == "req-\x85x"
    assert byte_hostile.answered["once not utf-8 [[hostile:notutf8x1]]"] == 2, "malformed: retried"
    assert byte_hostile.answered["always deep [[hostile:deep]]"] == 2, "malformed: retried up to --max-attempts"
    db = sqlite3.connect(f"file:{run_dir / 'journal.sqlite'}?mode=ro", uri=True)
    try:
        first = db.execute("SELECT error_class, error_message FROM attempts WHERE idx = 10 AND number = 1").fetchone()
    finally:
        db.close()
    assert first[0] == "malformed_answer" and "not UTF-8 text (byte 0xe9" in first[1]


def test_an_answer_over_the_cap_fails_as_too_large_and_is_never_paid_for_twice(tmp_path, byte_hostile):
    job = write_batch(tmp_path / "job.jsonl", ["always huge [[hostile:huge]]", "plain"])
    run_dir = tmp_path / "run"
    result = run_cli(
        "run",
        str(job),
        "--headless",
        "--base-url",
        byte_hostile.base_url,
        "--out",
        str(run_dir),
        "--max-answer-bytes",
        "524288",
    )
    assert result.returncode == 1, result.stderr
    [error] = strict_lines(run_dir / "errors.jsonl")
    assert error["error"]["code"] == "answer_too_large"
    assert "524,288" in error["error"]["message"] and "--max-answer-bytes" in error["error"]["message"]
    assert byte_hostile.answered["always huge [[hostile:huge]]"] == 1, "not retried"
    assert len(strict_lines(run_dir / "results.jsonl")) == 1


def test_an_answer_already_strict_is_kept_as_the_bytes_received():
    data = json.dumps(completion("hello")).encode()
    content, value = strict_answer(data, 200, None, MAX_ANSWER_BYTES)
    assert content is data and value == completion("hello") | {"id": value["id"]}
    pretty = json.dumps(completion("hello"), indent=2).encode()
    content, _ = strict_answer(pretty, 200, None, MAX_ANSWER_BYTES)
    assert b"\n" not in content and json.loads(content) == json.loads(pretty)


@pytest.mark.parametrize("fate", FATES[:-1])
def test_each_tolerated_answer_is_written_again_strictly(fate):
    content, value = strict_answer(answer_bytes(fate, "p", "m"), 200, "req-1", MAX_ANSWER_BYTES)
    assert value is not NOT_PARSED
    text = content.decode("utf-8")
    assert json.loads(text, parse_constant=_reject, object_pairs_hook=_unique) == value
    assert text.splitlines() == [text]


def test_an_answer_that_is_not_json_is_left_to_the_caller_to_name():
    content, value = strict_answer(b"<html>Sign in</html>", 200, None, MAX_ANSWER_BYTES)
    assert value is NOT_PARSED and content == b"<html>Sign in</html>"


def test_a_streamed_answer_is_held_to_the_same_rules():
    body = completion("p")
    body["choices"][0]["message"]["content"] = "half an emoji \ud83d, a line\u2028break"
    body["choices"][0]["logprobs"] = {"x": float("nan")}
    value, content = strict_body(body, MAX_ANSWER_BYTES)
    text = content.decode("utf-8")
    assert json.loads(text, parse_constant=_reject) == value
    assert value["choices"][0]["message"]["content"] == "half an emoji \ufffd, a line\u2028break"
    assert value["choices"][0]["logprobs"] == {"x": None} and text.splitlines() == [text]
    with pytest.raises(AnswerRefused) as refused:
        strict_body(body, 100)
    assert refused.value.error.kind == "answer_too_large"


# --------------------------------------------------------------------------- the attached view's detail


async def _open_detail(run_dir: Path, tmp_path: Path, index: int) -> str:
    """The attached view of `run_dir` with agent `index`'s detail open: its answer's text."""
    from swarm_tui.config import Config
    from swarm_tui.frontend.attached import AttachedRun
    from swarm_tui.ui.app import make_app
    from swarm_tui.ui.screens.detail import AgentDetailScreen

    from tests.helpers import wait_until

    source = AttachedRun(run_dir)
    app = make_app(source, config=Config(path=tmp_path / "config.toml"))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(lambda: source.stats.succeeded >= 2, "the view to follow", step=lambda: pilot.pause(0.02))
        app.grid.focus()
        app.grid.move_to(index)
        await pilot.press("enter")
        await wait_until(
            lambda: isinstance(app.screen, AgentDetailScreen), "the detail to open", step=lambda: pilot.pause(0.02)
        )
        await pilot.pause(0.1)
        shown = str(app.screen.query_one("#detail-answer").content)
        await pilot.press("escape", "q")
    await source.aclose()
    return shown


async def test_the_attached_detail_of_a_tolerated_answer_shows_it(tmp_path, byte_hostile):
    from tests.helpers import open_session, run_session

    session = open_session(tmp_path, byte_hostile.base_url, ["plain one", "with a bom [[hostile:bom]]"])
    await run_session(session)
    assert "answer to with a bom" in await _open_detail(tmp_path / "run", tmp_path, 1)


async def test_the_attached_detail_of_an_unreadable_journaled_answer_does_not_die(tmp_path, byte_hostile):
    """A journal written before answers were checked may hold a BOM: the detail says so, no traceback."""
    from tests.helpers import open_session, run_session

    session = open_session(tmp_path, byte_hostile.base_url, ["plain one", "plain two"])
    await run_session(session)
    db = sqlite3.connect(tmp_path / "run" / "journal.sqlite")
    db.execute("UPDATE results SET response = '\ufeff' || response WHERE idx = 1")
    db.commit()
    db.close()
    assert await _open_detail(tmp_path / "run", tmp_path, 1) == "(no answer)"
    run_cli("resume", str(tmp_path / "run"), "--headless")  # the export repairs it
    assert len(strict_lines(tmp_path / "run" / "results.jsonl")) == 2
