"""An answer's bytes as the provider declared and bounded them, on every transport.

* **The declared charset** (`Content-Type: application/json; charset=latin-1`, an SSE stream's
  `text/event-stream; charset=latin-1`): the answer is read in it and kept as UTF-8, paid for
  once; UTF-8 when none is declared; a charset no decoder knows is a `bad_response` that names it,
  never retried (the same request gets the same answer, paid again).
* **The size cap** (`--max-answer-bytes`): an answer past it is cut at the cap as
  `answer_too_large` and not retried, whether it comes whole, as a stream of chunks without end,
  as one SSE line without end, or as an error body without end (cut, and classified by its
  status). Memory and the bytes read stay near the cap; nothing waits for `--timeout`.

Each runs against a hostile server on loopback (`tests/hostile.py`), with the real CLI, on both
backends (`--backend aiohttp`: the project's own hot path, streams through the SDK; `httpx`:
everything through the SDK), streamed and not.
"""

from __future__ import annotations

import json
import sqlite3
import time

import pytest
from swarm_tui.providers.answer import MAX_ANSWER_BYTES, AnswerRefused, strict_answer
from swarm_tui.providers.body import declared_charset

from tests.conftest import read_jsonl, run_cli, write_batch
from tests.hostile import HostileServer, completion
from tests.servers import clear_proxy_env


@pytest.fixture
def hostile(monkeypatch):
    clear_proxy_env(monkeypatch)
    server = HostileServer().start()
    yield server
    server.stop()


def attempts(run_dir) -> list[tuple]:
    with sqlite3.connect(f"file:{run_dir / 'journal.sqlite'}?mode=ro", uri=True) as db:
        return db.execute(
            "SELECT idx, number, error_class, error_message FROM attempts ORDER BY idx, number"
        ).fetchall()


def run(tmp_path, server: HostileServer, prompts: list[str], *options: str):
    job = write_batch(tmp_path / "job.jsonl", prompts)
    run_dir = tmp_path / "run"
    started = time.monotonic()
    result = run_cli(
        "run", str(job), "--headless", "--base-url", server.base_url, "--out", str(run_dir), *options, timeout=180
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result, run_dir, time.monotonic() - started


# --------------------------------------------------------------------------- the declared charset


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_an_answer_in_its_declared_charset_is_read_in_it_and_paid_for_once(tmp_path, hostile, backend, stream):
    result, run_dir, _ = run(
        tmp_path,
        hostile,
        ["declared latin-1 [[hostile:latin1]]", "plain"],
        "--backend",
        backend,
        *(["--stream"] if stream else []),
    )
    assert result.returncode == 0, result.stderr
    answers = {line["custom_id"]: line for line in read_jsonl(run_dir / "results.jsonl")}
    content = answers["task-0000"]["response"]["body"]["choices"][0]["message"]["content"]
    assert content.endswith(" caf\u00e9"), content
    assert (run_dir / "results.jsonl").read_bytes().decode("utf-8")  # kept as UTF-8
    assert hostile.answered["declared latin-1 [[hostile:latin1]]"] == 1, "paid for once"
    assert [row[2] for row in attempts(run_dir)] == [None, None]


def test_a_charset_no_decoder_knows_is_a_bad_response_naming_it_and_not_paid_twice(tmp_path, hostile, backend):
    result, run_dir, _ = run(tmp_path, hostile, ["[[hostile:klingon]]"], "--backend", backend)
    assert result.returncode == 1, result.stderr
    [error] = read_jsonl(run_dir / "errors.jsonl")
    assert error["error"]["code"] == "bad_response"
    assert "charset 'klingon'" in error["error"]["message"], error["error"]["message"]
    assert hostile.seen["[[hostile:klingon]]"] == 1, "the same request gets the same answer: not sent again"


def test_the_charset_is_read_from_the_content_type():
    assert declared_charset("application/json") is None
    assert declared_charset(None) is None
    assert declared_charset("application/json; charset=UTF-8") == "utf-8"
    assert declared_charset('application/json;charset="ISO-8859-1"') == "iso-8859-1"
    assert declared_charset("text/event-stream; foo=bar; Charset=latin-1 ") == "latin-1"


def test_strict_answer_reads_the_declared_charset_and_refuses_bytes_it_does_not_hold():
    answer = completion("p")
    answer["choices"][0]["message"]["content"] = "caf\u00e9 \u20ac"
    cp1252 = json.dumps(answer, ensure_ascii=False).encode("cp1252")
    content, value = strict_answer(cp1252, 200, None, MAX_ANSWER_BYTES, charset="windows-1252")
    assert value["choices"][0]["message"]["content"] == "caf\u00e9 \u20ac"
    assert json.loads(content.decode("utf-8")) == value
    ascii_body = json.dumps(completion("p")).encode()
    assert strict_answer(ascii_body, 200, None, MAX_ANSWER_BYTES, charset="latin-1")[0] is ascii_body, "nothing to do"
    with pytest.raises(AnswerRefused) as refused:  # 0x81 is no character in Shift JIS's lead position here
        strict_answer(b'{"a": "\x81\x20"}', 200, None, MAX_ANSWER_BYTES, charset="shift_jis")
    assert refused.value.error.kind == "malformed_answer"
    assert "not shift_jis text as its content-type declares" in refused.value.error.message


# --------------------------------------------------------------------------- the size cap

CAP = 256 * 1024


@pytest.mark.parametrize(
    "fate, stream",
    [("endless", False), ("endless", True), ("endlessline", True)],
    ids=["whole", "streamed", "one-line"],
)
def test_an_answer_without_end_is_cut_at_the_cap_and_not_retried(tmp_path, hostile, backend, fate, stream):
    result, run_dir, took = run(
        tmp_path,
        hostile,
        [f"[[hostile:{fate}]]", "plain"],
        "--backend",
        backend,
        "--max-answer-bytes",
        str(CAP),
        "--timeout",
        "30",
        "--max-attempts",
        "2",
        *(["--stream"] if stream else []),
    )
    assert result.returncode == 1, result.stderr
    [error] = read_jsonl(run_dir / "errors.jsonl")
    assert error["error"]["code"] == "answer_too_large", error
    assert "262,144" in error["error"]["message"] and "--max-answer-bytes" in error["error"]["message"]
    assert hostile.endless_started == 1, "not retried: the same request asks for as much again"
    assert took < 30, "cut at the cap, not by --timeout"
    assert hostile.endless_bytes < 64 * CAP, f"{hostile.endless_bytes:,} bytes read for a cap of {CAP:,}"
    assert len(read_jsonl(run_dir / "results.jsonl")) == 1


def test_an_error_body_without_end_is_cut_and_classified_by_its_status(tmp_path, hostile, backend):
    result, run_dir, took = run(
        tmp_path,
        hostile,
        ["[[hostile:endless500]]"],
        "--backend",
        backend,
        "--max-answer-bytes",
        str(CAP),
        "--timeout",
        "30",
        "--max-attempts",
        "2",
    )
    assert result.returncode == 1, result.stderr
    [error] = read_jsonl(run_dir / "errors.jsonl")
    assert error["error"]["code"] in ("server_error", "http_500"), error
    assert error["error"]["message"].startswith("HTTP 500"), error
    assert len(error["error"]["message"]) < 1000
    assert hostile.endless_started == 2, "a server error: retried"
    assert took < 30, "cut at the cap, not by --timeout"
    assert hostile.endless_bytes < 64 * CAP, f"{hostile.endless_bytes:,} bytes read for a cap of {CAP:,}"
