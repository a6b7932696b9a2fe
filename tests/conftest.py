"""Shared fixtures: a real simulator on loopback, job files, and the CLI as a subprocess."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from swarm_tui.sim import SimConfig, SimServer

from tests.ui_fixtures import app_on_run, finished_run, journal_copy  # noqa: F401  (fixtures of the UI tests)

# A local Ray on a loaded 2-core machine (two test workers, the CLI's own Rays) can miss its
# health checks long enough for its GCS to declare the node dead ("Owner's node has crashed",
# once in a clean-clone CI run): give every Ray the tests start (here and in the CLI processes
# they spawn, which inherit this) a minute, not 15 s, before a node counts as gone.
os.environ.setdefault("RAY_health_check_failure_threshold", "20")
os.environ.setdefault("RAY_health_check_timeout_ms", "30000")

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def sim_factory():
    """Start simulators with the given config; all are stopped after the test. Thread mode by
    default; `mode="process"` where the simulator must not share the test process's GIL (a
    rate-limit figure on a busy machine: a starved simulator would charge a backlog at once)."""
    started: list[SimServer] = []

    def start(mode: str = "thread", **config) -> SimServer:
        server = SimServer(SimConfig(**{"latency_ms": 1.0, "latency_sigma": 0.3, **config})).start(mode=mode)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def sim(sim_factory) -> SimServer:
    return sim_factory()


BACKENDS = ("aiohttp", "httpx")
"""The two ways a call leaves (`--backend`): every transport-sensitive test runs on both."""


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture(autouse=True)
def isolated_config(tmp_path, monkeypatch):
    """Never read or write the developer's own config."""
    monkeypatch.setenv("SWARM_TUI_CONFIG", str(tmp_path / "config" / "config.toml"))
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def write_batch(path: Path, prompts: list[str], *, model: str = "sim-1", max_tokens: int = 64) -> Path:
    lines = [
        json.dumps(
            {
                "custom_id": f"task-{i:04d}",
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": {"model": model, "max_tokens": max_tokens, "messages": [{"role": "user", "content": prompt}]},
            },
            ensure_ascii=False,
        )
        for i, prompt in enumerate(prompts)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120, cwd: Path | None = None):
    """`swarm-tui ARGS` in a real subprocess; returns the CompletedProcess."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "swarm_tui", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        cwd=cwd,
    )


def start_cli(*args: str, **popen) -> subprocess.Popen:
    """`swarm-tui ARGS` started in a real subprocess (to signal, kill or run beside another);
    `popen`: its streams, env and cwd, as `subprocess.Popen` takes them."""
    return subprocess.Popen([sys.executable, "-m", "swarm_tui", *args], **popen)


def kill_when(child: subprocess.Popen, ready, what: str, timeout: float = 60) -> None:
    """SIGKILL `child` (started with `stderr=PIPE`) as soon as `ready()` holds: a real kill at the
    moment a test needs, never a sleep. Fails with the child's stderr when it ended first, or
    naming `what` when it never got there."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert child.poll() is None, child.stderr.read().decode() if child.stderr else "the child ended"
        assert time.monotonic() < deadline, f"{what}: not within {timeout:g} s"
        time.sleep(0.02)
    child.send_signal(signal.SIGKILL)
    child.wait(10)
    if child.stderr:
        child.stderr.close()


def read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
