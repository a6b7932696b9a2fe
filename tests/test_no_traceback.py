"""No traceback anywhere (issue 23): each case a clear error with exit 2 (130 for Ctrl-C), naming
file, line and field where there is one, with nothing sent and nothing half-made.

Config files that are not UTF-8, are directories, hold a table where a value belongs or cannot be
read; a read-only journal (resume, attach); a TOML job whose tasks share an id; an absurd format
in a template; a `count` past the limit; Ctrl-C at any moment of the first second.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from swarm_tui.frontend.attached import AttachedRun
from swarm_tui.jobs import MAX_TASKS

from tests.conftest import run_cli, write_batch


def assert_refused(result, *expected: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    for text in expected:
        assert text in result.stderr, result.stderr


# --------------------------------------------------------------------------- config files


def _config(tmp_path: Path, data: bytes | None) -> Path:
    path = tmp_path / "config" / "config.toml"
    path.parent.mkdir(exist_ok=True)
    if data is None:
        path.mkdir()
    else:
        path.write_bytes(data)
    return path


CONFIGS = {
    "latin-1": (b'[defaults]\nprovider = "caf\xe9"\n', ":2: encoding: not UTF-8 text: byte 0xe9 at column 16"),
    "directory": (None, ": config: is a directory, not a config file"),
    "provider-table": (b"[defaults]\nprovider = { a = 1 }\n", ":2: defaults.provider: must be a string, not a table"),
    "theme-list": (b'[defaults]\ntheme = ["a"]\n', ":2: defaults.theme: must be a string, not a list"),
    "providers-string": (b'providers = "x"\n', ":1: providers: must be tables: [providers.NAME], not a string"),
    "defaults-string": (b'defaults = "x"\n', ":1: defaults: must be a table: [defaults], not a string"),
    "profile-model-table": (
        b'[providers.x]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = { a = 1 }\n',
        ":3: providers.x.model: must be a string, not a table",
    ),
    "profile-timeout-bool": (
        b'[providers.x]\nbase_url = "http://127.0.0.1:9/v1"\ntimeout = true\n',
        ":3: providers.x.timeout: must be a number, not a boolean",
    ),
    "profile-rpm-string": (
        b'[providers.x]\nbase_url = "http://127.0.0.1:9/v1"\nrpm = "600"\n',
        ":3: providers.x.rpm: must be an integer, not a string",
    ),
    "bad-toml": (b"[defaults]\nprovider = \n", ":2: toml: Invalid value"),
}


@pytest.mark.parametrize("case", sorted(CONFIGS))
def test_a_config_file_that_cannot_be_used_is_named_with_its_line_and_field(tmp_path, case):
    data, expected = CONFIGS[case]
    config = _config(tmp_path, data)
    for argv in (["providers", "list"], ["run", "--headless", "--out", str(tmp_path / "run")]):
        result = run_cli(*argv, env={"SWARM_TUI_CONFIG": str(config)})
        assert_refused(result, f"{config}{expected}")
        assert not (tmp_path / "run").exists()


def test_a_config_file_that_cannot_be_read_is_named(tmp_path):
    """An I/O error on read (root reads any file, so the error is made by the kernel: /proc/self/mem)."""
    result = run_cli("providers", "list", env={"SWARM_TUI_CONFIG": "/proc/self/mem"})
    assert_refused(result, "/proc/self/mem: config: cannot read:")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode")
def test_a_config_file_without_read_permission_is_named(tmp_path):
    config = _config(tmp_path, b'[defaults]\nprovider = "sim"\n')
    config.chmod(0)
    result = run_cli("providers", "list", env={"SWARM_TUI_CONFIG": str(config)})
    assert_refused(result, f"{config}: config: cannot read: Permission denied")


# --------------------------------------------------------------------------- a read-only journal


@contextlib.contextmanager
def read_only(*paths: Path):
    """`paths` made read-only: by their mode for a user, with `chattr +i` for root (whom modes do
    not stop); the test is skipped where neither can be done."""
    if os.geteuid() != 0:
        modes = {p: p.stat().st_mode for p in paths}
        for p in paths:
            p.chmod(modes[p] & ~0o222)
        try:
            yield
        finally:
            for p, mode in modes.items():
                p.chmod(mode)
        return
    if shutil.which("chattr") is None:
        pytest.skip("no chattr to make a file read-only for root")
    if subprocess.run(["chattr", "+i", *map(str, paths)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not allowed here")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", *map(str, paths)], capture_output=True)


@pytest.fixture
def finished_run(tmp_path, sim) -> Path:
    job = write_batch(tmp_path / "job.jsonl", ["a", "b", "c [[sim:500]]"])
    run_dir = tmp_path / "run"
    assert (
        run_cli(
            "run", str(job), "--headless", "--base-url", sim.base_url, "--out", str(run_dir), "--max-attempts", "1"
        ).returncode
        == 1
    )
    return run_dir


def test_resume_of_a_read_only_journal_exits_2_naming_it(finished_run, sim):
    journal = finished_run / "journal.sqlite"
    sent = sim.stats()["requests"]
    with read_only(finished_run, journal):
        result = run_cli("resume", str(finished_run), "--headless", "--retry-failed")
    assert_refused(result, f"{journal}: journal: cannot write {journal}", "resume writes the journal")
    assert sim.stats()["requests"] == sent


async def test_attach_reads_a_finished_run_in_a_read_only_directory(finished_run):
    with read_only(finished_run, finished_run / "journal.sqlite"):
        source = AttachedRun(finished_run)
        try:
            source.poll()
            assert (source.stats.total, source.stats.succeeded, source.stats.failed) == (3, 2, 1)
        finally:
            await source.aclose()


# --------------------------------------------------------------------------- job files


TOML_HEAD = 'name = "x"\nmodel = "sim-1"\n'


@pytest.mark.parametrize(
    "body, expected",
    [
        (
            '[tasks]\ncount = 3\nprompt = "p"\nid = "same"\n',
            ":6: tasks.id: gives agents 1 and 2 the same id 'same': put {agent} (or {index}) in it",
        ),
        (
            '[tasks]\ncount = 2\nprompt = "p"\nid = "a-{agent}"\n[[task]]\nid = "a-2"\nprompt = "q"\n',
            "task[0].id: missing, empty or duplicate: 'a-2'",
        ),
        (
            '[tasks]\ncount = 2\nprompt = "{agent:999999999}"\n',
            "tasks.prompt: bad template '{agent:999999999}': the format of {agent} is wider than 1,000 characters",
        ),
        ('[tasks]\ncount = 2\nprompt = "{agent:.999999999f}"\n', "the format of {agent} is wider than 1,000"),
        ('[tasks]\ncount = 2\nprompt = "{agent:{total}}"\n', "the format of {agent} holds a placeholder of its own"),
        ('[tasks]\ncount = 2\nprompt = "{agent[0]}"\n', "unknown placeholder {agent[0]}"),
        ('[tasks]\ncount = 2\nprompt = "{agent.__class__}"\n', "unknown placeholder {agent.__class__}"),
        ('[tasks]\ncount = 2\nprompt = "{index:c}"\nid = "{agent:s}"\n', "tasks.id: bad template '{agent:s}'"),
        ('system = "{agent:99999999999999999999999}"\n[tasks]\ncount = 2\nprompt = "p"\n', ":3: system: bad template"),
        (
            '[tasks]\ncount = 100000000000\nprompt = "p"\n',
            f":4: tasks.count: 100,000,000,000 tasks is over the limit of {MAX_TASKS:,} a job (split it)",
        ),
    ],
    ids=[
        "count-same-id",
        "task-id-clash",
        "huge-width",
        "huge-precision",
        "nested",
        "index",
        "attribute",
        "bad-code",
        "system-width",
        "count-limit",
    ],
)
def test_a_toml_job_that_cannot_run_is_refused_and_leaves_nothing(tmp_path, sim, body, expected):
    job = tmp_path / "job.toml"
    job.write_text(TOML_HEAD + body)
    result = run_cli(
        "run", str(job), "--headless", "--base-url", sim.base_url, "--out", str(tmp_path / "run"), timeout=60
    )
    assert_refused(result, f"{job}", expected)
    assert not (tmp_path / "run").exists(), "no half-made run directory"
    assert sim.stats()["requests"] == 0


# --------------------------------------------------------------------------- Ctrl-C in the first second


def _start_and_interrupt(args: list[str], delay: float, env: dict[str, str]) -> subprocess.CompletedProcess:
    """Start `swarm-tui ARGS`, and send SIGINT `delay` seconds after it began loading swarm_tui's modules
    (`-X importtime` says when: before that, Ctrl-C lands in Python's own start, not ours)."""
    process = subprocess.Popen(
        [sys.executable, "-X", "importtime", "-m", "swarm_tui", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )
    started = threading.Event()
    stderr: list[str] = []

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            if line.startswith("import time:"):
                if "swarm_tui.core.errors" in line:  # imported by the CLI's own imports, inside `entry`
                    started.set()
                continue
            stderr.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert started.wait(60), "swarm_tui never started loading"
    time.sleep(delay)
    assert process.poll() is None, "the run ended before the interrupt"
    process.send_signal(signal.SIGINT)
    stdout, _ = process.communicate(timeout=60)
    reader.join(10)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, "".join(stderr))


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.15, 0.3, 0.6, 1.0])
def test_ctrl_c_at_any_moment_of_startup_exits_130_in_one_line(tmp_path, sim_factory, delay):
    sim = sim_factory(latency_ms=2000.0, latency_sigma=0.0)  # the run outlasts the first second
    job = write_batch(tmp_path / "job.jsonl", [f"task {i}" for i in range(20)])
    result = _start_and_interrupt(
        ["run", str(job), "--headless", "--base-url", sim.base_url, "--out", str(tmp_path / "run")], delay, {}
    )
    assert result.returncode == 130, result.stderr
    assert "Traceback" not in result.stderr and "KeyboardInterrupt" not in result.stderr, result.stderr
    if (tmp_path / "run").exists():  # interrupted after the run began: a whole run, resumable
        assert (tmp_path / "run" / "journal.sqlite").exists() or not any(
            p.name != ".lock" for p in (tmp_path / "run").iterdir()
        ), list((tmp_path / "run").iterdir())
