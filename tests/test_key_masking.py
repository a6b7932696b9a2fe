"""Secrets never leave: a provider that echoes the caller's key anywhere (as
`error.code`, `error.type`, in `x-request-id`, in an answer, URL-encoded, in another letter case,
after `Bearer `) never gets it written or shown: not in any file of the run directory (the
journal's SQLite file and its WAL included), not on stdout or stderr, not in the engine's events
(what the screen shows), not in `providers test`'s line, not in a log record.
"""

from __future__ import annotations

import base64
import io
import logging
import os
from pathlib import Path
from urllib.parse import quote

import pytest
from swarm_tui.core.events import AttemptEnded, TaskFailed
from swarm_tui.util import secrets

from tests.conftest import read_jsonl, run_cli, write_batch
from tests.helpers import open_session
from tests.hostile_answers import ByteHostileServer

KEY = "sk-Echo-0123456789abcdefGHIJ/klmn+4567"
"""A key with characters URL-encoding and base64 change (`/`, `+`) and both letter cases."""


def spellings(key: str = KEY) -> list[bytes]:
    """What must never appear: the key as given, in either case, URL-encoded, base64-encoded."""
    texts = [key, key.lower(), key.upper(), quote(key, safe=""), base64.b64encode(key.encode()).decode()]
    return [t.encode() for t in texts]


def assert_nowhere(data: bytes, where: str) -> None:
    for spelling in spellings():
        assert spelling not in data, f"{spelling!r} in {where}"


@pytest.fixture
def echoing():
    servers: list[ByteHostileServer] = []

    def start(**kwargs) -> ByteHostileServer:
        server = ByteHostileServer(**kwargs).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


FATES = ["keyok", "keycode", "keyheader", "keyspell", "keytype"]


def test_a_key_echoed_anywhere_never_reaches_a_file_or_the_terminal(tmp_path, echoing):
    server = echoing()
    job = write_batch(tmp_path / "job.jsonl", [f"t{i} [[hostile:{fate}]]" for i, fate in enumerate(FATES)])
    run_dir = tmp_path / "run"
    result = run_cli(
        "run",
        str(job),
        "--headless",
        "--base-url",
        server.base_url,
        "--api-key-env",
        "RELAY_KEY",
        "--out",
        str(run_dir),
        env={"RELAY_KEY": KEY},
    )
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert sum(server.answered.values()) == 1, "the key was sent (and echoed)"
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"journal.sqlite", "results.jsonl", "errors.jsonl", "summary.json"}
    for path in files:
        assert_nowhere(path.read_bytes(), str(path))
    assert_nowhere((result.stdout + result.stderr).encode(), "the CLI's output")

    [answer] = read_jsonl(run_dir / "results.jsonl")
    assert answer["response"]["request_id"] == "req-***"
    assert answer["response"]["body"]["id"] == "chatcmpl-***"
    assert answer["response"]["body"]["choices"][0]["message"]["content"].endswith("(you sent ***, ***, Bearer ***)")
    errors = {line["custom_id"]: line for line in read_jsonl(run_dir / "errors.jsonl")}
    assert errors["task-0001"]["error"]["code"] == "***"
    assert errors["task-0002"]["response"]["request_id"] == "req-***"
    assert errors["task-0003"]["error"]["message"] == "bad key *** / *** / *** / Authorization: Bearer ***"


async def test_the_journal_and_its_wal_while_open_and_the_events_never_hold_the_key(tmp_path, echoing, monkeypatch):
    server = echoing()
    monkeypatch.setenv("RELAY_KEY", KEY)
    session = open_session(
        tmp_path,
        server.base_url,
        [f"t{i} [[hostile:{fate}]]" for i, fate in enumerate(FATES)],
        api_key_env="RELAY_KEY",
        max_attempts=1,
    )
    events: list = []
    session.engine.subscribe(events.append)
    try:
        await session.run()
        wal = tmp_path / "run" / "journal.sqlite-wal"
        assert wal.exists() and wal.stat().st_size > 0, "the WAL holds this session's writes"
        assert_nowhere(wal.read_bytes(), "the WAL")
    finally:
        await session.aclose()
    assert_nowhere((tmp_path / "run" / "journal.sqlite").read_bytes(), "the journal")
    assert_nowhere(repr(events).encode(), "the engine's events (what the screen shows)")
    failures = [e.attempt.error for e in events if isinstance(e, TaskFailed)]
    assert {f.code for f in failures} >= {"***"} and all(
        e.attempt.request_id != f"req-{KEY}" for e in events if isinstance(e, AttemptEnded)
    )


@pytest.mark.parametrize(
    "fate, ok, echoed",
    [("keyok", True, True), ("keyspell", False, True), ("keyheader", False, False), ("keycode", False, False)],
)
def test_providers_test_never_prints_the_key(tmp_path, echoing, fate, ok, echoed):
    server = echoing(default_fate=fate)
    config = tmp_path / "config" / "config.toml"
    config.parent.mkdir()
    config.write_text(f'[providers.relay]\nbase_url = "{server.base_url}"\nmodel = "m"\napi_key_env = "RELAY_KEY"\n')
    result = run_cli("providers", "test", "relay", env={"SWARM_TUI_CONFIG": str(config), "RELAY_KEY": KEY})
    assert result.returncode == (0 if ok else 1), result.stderr
    assert ("OK" if ok else "FAILED") in result.stdout
    assert ("***" in result.stdout) is echoed  # the line shows the request id (OK) or the message (FAILED)
    assert_nowhere((result.stdout + result.stderr).encode(), "providers test's output")


def test_every_spelling_of_a_registered_key_is_masked():
    key = "sk-unit-9876543210ZYXWVUTsrqp/+=xyz"
    secrets.register(key)
    for text in (
        key,
        key.lower(),
        key.upper(),
        quote(key, safe=""),
        f"Authorization: Bearer {key}",
        base64.b64encode(f"Bearer {key}".encode()).decode(),  # an encoded header, any alignment
        base64.b64encode(f"user:{key}".encode()).decode(),  # Basic auth
        base64.b64encode(f"{key}".encode()).decode(),
        base64.urlsafe_b64encode(f"ab{key}".encode()).decode(),
    ):
        masked = secrets.mask(f"before {text} after")
        assert masked.startswith("before ") and masked.endswith(" after") and "***" in masked, text
        for spelling in (key, key.lower(), key.upper(), quote(key, safe="")):
            assert spelling not in masked
    assert secrets.mask("nothing secret here") == "nothing secret here"
    value = {"a": [key, 3, {"b": f"x{key}"}], key: None}
    assert secrets.mask_value(value) == {"a": ["***", 3, {"b": "x***"}], "***": None}
    plain = {"a": ["x"]}
    assert secrets.mask_value(plain) is plain, "nothing rebuilt when nothing changes"
    secrets.register("short")  # too short to be a key: never masked
    assert secrets.mask("a short word") == "a short word"


def test_log_records_are_masked_whatever_the_logger(monkeypatch):
    key = "sk-log-abcdefghijklmnop0123456789"
    monkeypatch.setenv("LOG_KEY", key)
    from swarm_tui.providers.profile import ProviderProfile, resolve_api_key

    assert (
        resolve_api_key(
            ProviderProfile("x", base_url="https://api.example.com/v1", api_key_env="LOG_KEY"),
            "https://api.example.com/v1",
        )
        == key
    )
    secrets.install_log_masking()
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("swarm_tui.engine.somewhere")
    logger.addHandler(handler)
    try:
        logger.warning("the provider said %s", f"Incorrect API key {key}")
        try:
            raise RuntimeError(f"boom {key.upper()}")
        except RuntimeError:
            logger.exception("failed with %r", {"auth": f"Bearer {key}"})
    finally:
        logger.removeHandler(handler)
    written = stream.getvalue()
    assert "Incorrect API key ***" in written and "boom ***" in written and "Bearer ***" in written
    assert key not in written and key.upper() not in written


def test_the_run_directory_of_an_ordinary_run_never_holds_the_key(tmp_path, echoing):
    """The key, sent on every request, is in none of a plain run's files (masking costs nothing to find)."""
    server = echoing()
    job = write_batch(tmp_path / "job.jsonl", [f"task {i}" for i in range(10)])
    result = run_cli(
        "run",
        str(job),
        "--headless",
        "--base-url",
        server.base_url,
        "--api-key-env",
        "RELAY_KEY",
        "--out",
        str(tmp_path / "run"),
        env={"RELAY_KEY": KEY},
    )
    assert result.returncode == 0, result.stderr
    for path in Path(tmp_path / "run").rglob("*"):
        if path.is_file():
            assert_nowhere(path.read_bytes(), str(path))
    assert os.environ.get("RELAY_KEY") is None
