"""API keys come from env vars and never reach the journal, outputs or error text."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.conftest import read_jsonl, run_cli, write_batch

KEY = "sk-test-SECRET-0123456789abcdefXYZ"


def test_no_key_in_any_file_of_the_run_directory(tmp_path, sim_factory):
    sim = sim_factory(require_key=KEY)
    job = write_batch(tmp_path / "job.jsonl", [f"task {i}" for i in range(20)] + ["boom [[sim:500]]"])
    result = run_cli(
        "run",
        str(job),
        "--headless",
        "--base-url",
        sim.base_url,
        "--api-key-env",
        "RELAY_KEY",
        "--out",
        str(tmp_path / "run"),
        "--max-attempts",
        "2",
        env={"RELAY_KEY": KEY},
    )
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
    result = run_cli(
        "run",
        str(job),
        "--headless",
        "--base-url",
        sim.base_url,
        "--api-key-env",
        "RELAY_KEY",
        "--out",
        str(tmp_path / "run"),
        env={"RELAY_KEY": wrong},
    )
    assert result.returncode == 1
    errors = (tmp_path / "run" / "errors.jsonl").read_text()
    assert "invalid_api_key" in errors
    for path in (tmp_path / "run").rglob("*"):
        if path.is_file():
            assert wrong.encode() not in path.read_bytes(), path
    assert wrong not in result.stderr


# --------------------------------------------------------------------------- a provider that echoes the key


class EchoingProvider:
    """A hostile OpenAI-compatible endpoint on loopback: its errors quote the caller's key back.

    Some providers do (`Incorrect API key provided: sk-...`). A body asking for `[[400]]` gets a
    400 that quotes the key too; everything else gets a 401. `seen` counts the requests.
    """

    def __init__(self) -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                body = self.rfile.read(int(self.headers.get("content-length") or 0)).decode("utf-8", "replace")
                key = (self.headers.get("authorization") or "").removeprefix("Bearer ")
                owner.seen.append(key)
                if "[[400]]" in body:
                    status, error = (
                        400,
                        {
                            "message": f"Invalid request sent with key {key}: unsupported parameter",
                            "type": "invalid_request_error",
                            "code": "invalid_request",
                            "param": None,
                        },
                    )
                else:
                    status, error = (
                        401,
                        {
                            "message": f"Incorrect API key provided: {key}. You can find your API "
                            "key at https://platform.example.com/account/api-keys.",
                            "type": "invalid_request_error",
                            "code": "invalid_api_key",
                            "param": None,
                        },
                    )
                payload = json.dumps({"error": error}).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args) -> None:
                pass

        self.seen: list[str] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def echoing_provider():
    server = EchoingProvider()
    yield server
    server.close()


def test_a_provider_that_echoes_the_key_in_its_errors_never_gets_it_written(tmp_path, echoing_provider):
    job = write_batch(tmp_path / "job.jsonl", ["who am I", "bad [[400]]"])
    result = run_cli(
        "run",
        str(job),
        "--headless",
        "--base-url",
        echoing_provider.base_url,
        "--api-key-env",
        "RELAY_KEY",
        "--out",
        str(tmp_path / "run"),
        "--max-attempts",
        "2",
        env={"RELAY_KEY": KEY},
    )
    assert result.returncode == 1, result.stderr
    assert echoing_provider.seen and set(echoing_provider.seen) == {KEY}, "the key was sent, and echoed"
    files = [p for p in (tmp_path / "run").rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"journal.sqlite", "errors.jsonl", "summary.json"}
    for path in files:  # the journal (and its WAL), errors.jsonl, summary.json, everything
        assert KEY.encode() not in path.read_bytes(), path
    assert KEY not in result.stderr + result.stdout
    lines = {line["custom_id"]: line for line in read_jsonl(tmp_path / "run" / "errors.jsonl")}
    auth, bad = lines["task-0000"], lines["task-0001"]
    assert (auth["response"]["status_code"], auth["error"]["code"]) == (401, "invalid_api_key")
    assert auth["error"]["message"].startswith("Incorrect API key provided: ***.")  # the echo, masked
    assert bad["response"]["status_code"] == 400 and "with key ***:" in bad["error"]["message"]


# --------------------------------------------------------------------------- a key where its env var's NAME belongs

LOOKS_LIKE = "sk-proj-abcDEF0123456789ghiJKL0123456789"


@pytest.mark.parametrize(
    "flags, field",
    [
        (["--api-key-env", LOOKS_LIKE], "api_key_env"),
        (["--api-key-env", "not a name"], "api_key_env"),
        (["--fallback-base-url", "{sim}", "--fallback-api-key-env", LOOKS_LIKE], "fallback_api_key_env"),
        (["--fallback-base-url", f"http://user:{LOOKS_LIKE}@127.0.0.1:9/v1"], "fallback_base_url"),
    ],
    ids=["key-as-env", "bad-name", "fallback-key-as-env", "fallback-url-userinfo"],
)
def test_a_key_given_as_a_flag_on_loopback_exits_2_before_anything_is_journaled(tmp_path, sim, flags, field):
    job = write_batch(tmp_path / "job.jsonl", ["hello"])
    flags = [f.replace("{sim}", sim.base_url) for f in flags]
    result = run_cli("run", str(job), "--headless", "--base-url", sim.base_url, *flags, "--out", str(tmp_path / "run"))
    assert result.returncode == 2, result.stderr
    assert field in result.stderr and "not shown" in result.stderr
    for secret in (LOOKS_LIKE, "not a name"):
        assert secret not in result.stderr + result.stdout
    assert not (tmp_path / "run").exists()
    assert sim.stats()["requests"] == 0


@pytest.mark.parametrize(
    "argv",
    [
        ["--base-url", "https://api.example.invalid/v1", "--api-key-env", LOOKS_LIKE],
        ["--base-url", f"https://user:{LOOKS_LIKE}@api.example.invalid/v1", "--api-key-env", "RELAY_KEY"],
        ["--base-url", f"https://{LOOKS_LIKE}@api.example.invalid/v1"],
        ["--base-url", LOOKS_LIKE],
    ],
    ids=["remote-key-as-env", "remote-userinfo", "remote-user-only", "key-as-url"],
)
def test_a_key_given_as_a_flag_for_a_remote_endpoint_is_refused_without_echo(tmp_path, argv):
    job = write_batch(tmp_path / "job.jsonl", ["hello"])
    result = run_cli("run", str(job), "--headless", *argv, "--out", str(tmp_path / "run"), env={"RELAY_KEY": KEY})
    assert result.returncode == 2, result.stderr
    assert "not shown" in result.stderr
    assert LOOKS_LIKE not in result.stderr + result.stdout
    assert not (tmp_path / "run").exists()


def test_shadow_refuses_a_key_as_its_key_env_without_echo(tmp_path, sim):
    result = run_cli(
        "shadow",
        "--primary",
        sim.base_url,
        "--secondary",
        sim.base_url,
        "--model",
        "m",
        "--duration",
        "2",
        "--rate",
        "1",
        "--primary-key-env",
        LOOKS_LIKE,
        "--out",
        str(tmp_path / "s"),
    )
    assert result.returncode == 2, result.stderr
    assert "api_key_env" in result.stderr and LOOKS_LIKE not in result.stderr + result.stdout
    assert sim.stats()["requests"] == 0


@pytest.mark.parametrize(
    "setting, field",
    [
        (f'api_key_env = "{LOOKS_LIKE}"', "api_key_env"),
        (
            f'fallback_base_url = "https://api.example.com/v1"\nfallback_api_key_env = "{LOOKS_LIKE}"',
            "fallback_api_key_env",
        ),
        (f'base_url = "https://me:{LOOKS_LIKE}@api.example.com/v1"', "base_url"),
    ],
    ids=["api_key_env", "fallback_api_key_env", "base_url-userinfo"],
)
def test_an_old_config_holding_a_key_fails_to_load_and_providers_list_never_prints_it(tmp_path, setting, field):
    config = tmp_path / "config" / "config.toml"
    config.parent.mkdir()
    table = setting if setting.startswith("base_url") else f'base_url = "https://api.example.com/v1"\n{setting}'
    config.write_text(f'[providers.relay]\nmodel = "m"\n{table}\n', encoding="utf-8")
    for argv in (["providers", "list"], ["providers", "test", "relay"], ["run", "--headless", "--provider", "sim"]):
        result = run_cli(*argv, env={"SWARM_TUI_CONFIG": str(config)})
        assert result.returncode == 2, (argv, result.stderr)
        assert str(config) in result.stderr and f"providers.relay.{field}" in result.stderr
        assert LOOKS_LIKE not in result.stderr + result.stdout
