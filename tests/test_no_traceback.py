"""No traceback anywhere: each case a clear error with exit 2 (130 for Ctrl-C), naming
file, line and field where there is one, with nothing sent and nothing half-made.

Config files that are not UTF-8, are directories, hold a table where a value belongs or cannot be
read; a read-only journal (resume, attach); a TOML job whose tasks share an id; an absurd format
in a template; a `count` past the limit; Ctrl-C at any moment of the first second.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
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
        stdout=subprocess.DEVNULL,
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
    process.wait(timeout=60)
    reader.join(10)  # the one reader of stderr: the whole of it, for the assertions
    return subprocess.CompletedProcess(process.args, process.returncode, "", "".join(stderr))


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.15, 0.3, 0.6, 1.0])
def test_ctrl_c_at_any_moment_of_startup_exits_130_in_one_line(tmp_path, sim_factory, delay):
    sim = sim_factory(latency_ms=2000.0, latency_sigma=0.0)  # the run outlasts the first second
    job = write_batch(tmp_path / "job.jsonl", [f"task {i}" for i in range(20)])
    result = _start_and_interrupt(
        ["run", str(job), "--headless", "--base-url", sim.base_url, "--out", str(tmp_path / "run")], delay, {}
    )
    assert result.returncode == 130, result.stderr
    assert "Traceback" not in result.stderr and "KeyboardInterrupt" not in result.stderr, result.stderr
    assert "Exception ignored" not in result.stderr, result.stderr
    if (tmp_path / "run").exists():  # interrupted after the run began: a whole run, resumable
        assert (tmp_path / "run" / "journal.sqlite").exists() or not any(
            p.name != ".lock" for p in (tmp_path / "run").iterdir()
        ), list((tmp_path / "run").iterdir())


# --------------------------------------------------------------------------- a cache or a journal that cannot be read


def _garbled_cache(directory: Path) -> Path:
    """A response cache of 2,000 answers whose later pages are overwritten with garbage (what a disk
    fault or a copy cut short leaves): its first pages read, the answers do not."""
    from swarm_tui.cache.store import FILE_NAME, SCHEMA

    directory.mkdir(parents=True, exist_ok=True)
    path = directory / FILE_NAME
    db = sqlite3.connect(path)
    db.executescript(SCHEMA)
    db.executemany(
        "INSERT INTO answers (key, model, response, size, created_at, last_used_at) VALUES (?, ?, ?, ?, ?, ?)",
        ((f"k{i}", "m", b"x" * 500, 500, 1.0, 1.0) for i in range(2000)),
    )
    db.commit()
    db.close()
    size = path.stat().st_size
    noise = random.Random(7)
    with path.open("r+b") as f:
        for offset in range(size // 3, size, 4096):
            f.seek(offset)
            f.write(noise.randbytes(4096))
    return path


@pytest.mark.parametrize("action", ["stats", "prune", "clear"])
def test_the_cache_command_on_a_cache_with_garbage_pages_says_so(tmp_path, action):
    path = _garbled_cache(tmp_path / "cache")
    result = run_cli("cache", action, "--cache-dir", str(tmp_path / "cache"))
    assert_refused(result, str(path), "cannot be read", "remove the file")


def test_a_run_with_a_cache_with_garbage_pages_goes_on_uncached(tmp_path, sim):
    _garbled_cache(tmp_path / "cache")
    job = write_batch(tmp_path / "job.jsonl", [f"t{i}" for i in range(5)])
    result = run_cli(
        "run",
        str(job),
        "--headless",
        "--base-url",
        sim.base_url,
        "--out",
        str(tmp_path / "run"),
        "--cache",
        "--cache-dir",
        str(tmp_path / "cache"),
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr


def test_replay_reads_a_finished_run_in_a_read_only_directory(finished_run):
    with read_only(finished_run, finished_run / "journal.sqlite"):
        result = run_cli("replay", str(finished_run))
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "makespan" in result.stdout, result.stderr


# --------------------------------------------------------------------------- a noisy MCP server


def test_an_mcp_server_that_prints_lines_that_are_not_json_rpc_costs_one_line(tmp_path, sim):
    job = tmp_path / "agents.toml"
    job.write_text(
        'name = "noisy"\nmodel = "sim-1"\n[request]\nmax_tokens = 512\n[agents]\nmax_steps = 4\n'
        f'[[tools.mcp]]\nname = "noisy"\ncommand = ["python", "{Path(__file__).parent / "mcp_noisy.py"}"]\n'
        '[tasks]\ncount = 3\nprompt = "agent {agent} [[sim:tools=2]]"\n'
    )
    result = run_cli("run", str(job), "--headless", "--base-url", sim.base_url, "--out", str(tmp_path / "run"))
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    noise = [line for line in result.stderr.splitlines() if "not JSON-RPC" in line]
    assert len(noise) == 1 and "noisy MCP server v0 starting" in noise[0], result.stderr


# --------------------------------------------------------------------------- the ends of a command


def _ctrl_c_as(module: str, tmp_path: Path, *, taken: str) -> dict[str, str]:
    """The environment of a process that gets a Ctrl-C as `module` starts loading (a
    `sitecustomize` does it), `taken` as Python or a library can take it: "as_an_error" (pydantic
    building a schema while `import openai` runs turns it into its `SchemaError`), "in_a_finalizer"
    (the interpreter raises it in a weak reference's callback, prints "Exception ignored in" and
    goes on)."""
    (tmp_path / "sitecustomize.py").write_text(
        textwrap.dedent(
            f"""
            import importlib.abc, signal, sys

            def as_an_error():
                try:
                    signal.raise_signal(signal.SIGINT)
                except KeyboardInterrupt as exc:
                    from pydantic_core import SchemaError
                    raise SchemaError(f"Error building a schema: {{exc!r}}") from exc

            class Finalized:
                def __del__(self):
                    signal.raise_signal(signal.SIGINT)

            def in_a_finalizer():
                Finalized()

            class Interrupted(importlib.abc.MetaPathFinder):
                def find_spec(self, name, path, target=None):
                    if name == {module!r}:
                        sys.meta_path.remove(self)
                        {taken}()
                    return None

            sys.meta_path.insert(0, Interrupted())
            """
        )
    )
    return {"PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def test_a_ctrl_c_a_library_turns_into_another_error_while_modules_load_exits_130(tmp_path):
    """A Ctrl-C that lands in pydantic building a schema (while `import openai` runs) comes out of the
    import as pydantic's `SchemaError`, not as KeyboardInterrupt. Played here for certain."""
    env = _ctrl_c_as("openai", tmp_path, taken="as_an_error")
    result = run_cli("run", "--headless", "--out", str(tmp_path / "run"), env=env)
    assert result.returncode == 130, result.stderr
    assert result.stderr.strip() == "swarm-tui: interrupted", result.stderr


@pytest.mark.parametrize(
    "module, console",
    [
        ("openai", "--headless"),
        ("swarm_tui.run.session", "--headless"),
        ("swarm_tui.frontend.headless", "--headless"),
        ("swarm_tui.ui.app", "--theme=swarm-dark"),
    ],
    ids=["parser", "handler", "loop", "console"],
)
def test_a_ctrl_c_the_interpreter_drops_in_a_finalizer_while_modules_load_stops_the_run(tmp_path, sim, module, console):
    """Python raises a Ctrl-C's KeyboardInterrupt wherever it is, a finalizer too (a weak reference's
    callback while the garbage collector runs), where it is dropped: a run whose modules were
    loading went on to the end and exited 0. Played here for certain as the command line is built,
    as the run opens, and in the run's event loop before it hears Ctrl-C itself (headless, and
    the console's, which would have started): nothing is sent."""
    env = _ctrl_c_as(module, tmp_path, taken="in_a_finalizer") | {"SWARM_TUI_FORCE_TUI": "1"}
    job = write_batch(tmp_path / "job.jsonl", [f"task {i}" for i in range(5)])
    result = run_cli(
        "run", str(job), console, "--base-url", sim.base_url, "--out", str(tmp_path / "run"), env=env, timeout=60
    )
    assert result.returncode == 130, result.stderr
    assert result.stderr.strip() == "swarm-tui: interrupted", result.stderr
    assert sim.stats()["requests"] == 0


def test_a_command_whose_ctrl_c_was_dropped_while_its_parser_loaded_does_not_start(tmp_path):
    env = _ctrl_c_as("swarm_tui.cli.estimate_cmd", tmp_path, taken="in_a_finalizer")
    result = run_cli("estimate", env=env)
    assert result.returncode == 130, result.stderr
    assert result.stderr.strip() == "swarm-tui: interrupted", result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize(
    "args, codes",
    [(["estimate"], {141}), (["providers", "list"], {141}), (["--help"], {0, 141})],
    ids=["estimate", "providers", "help"],
)
def test_output_into_a_pipe_closed_early_ends_quietly(args, codes):
    """`swarm-tui estimate | head -1`: the reader is gone before the command writes (closed here
    before it starts, so that every write meets the closed pipe, whatever the machine's pace)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "swarm_tui", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    stderr = process.stderr.read().decode()
    code = process.wait(60)
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr and "Exception ignored" not in stderr, stderr
    assert code in codes, (code, stderr)  # 141: SIGPIPE's; argparse's --help ignores a closed pipe itself


@pytest.fixture
def garbled_run(tmp_path, sim) -> Path:
    """A finished run of 300 tasks whose journal's second half is overwritten with garbage: it opens
    (its first pages hold the schema and the run's meta), and breaks wherever a command reads on."""
    job = write_batch(tmp_path / "job.jsonl", [f"task {i} " + "x" * 300 for i in range(300)])
    run_dir = tmp_path / "run"
    assert run_cli("run", str(job), "--headless", "--base-url", sim.base_url, "--out", str(run_dir)).returncode == 0
    journal = run_dir / "journal.sqlite"
    db = sqlite3.connect(journal)  # every page in the file itself (none left in a WAL to read instead)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.execute("PRAGMA journal_mode = DELETE")
    db.close()
    size = journal.stat().st_size
    noise = random.Random(3)
    with journal.open("r+b") as f:
        for offset in range(size // 2, size, 4096):
            f.seek(offset)
            f.write(noise.randbytes(4096))
    return run_dir


@pytest.mark.parametrize(
    "command",
    [["replay"], ["export"], ["resume", "--headless"], ["export-traces", "--endpoint", "http://127.0.0.1:9"]],
    ids=["replay", "export", "resume", "export-traces"],
)
def test_a_command_on_a_journal_with_garbage_pages_names_it(garbled_run, command):
    result = run_cli(command[0], str(garbled_run), *command[1:])
    journal = garbled_run / "journal.sqlite"
    # SQLite meets the garbage as a malformed page, or (where it lands in a text value) as text
    # that is not UTF-8: which comes first depends on where the run's rows fell in the file
    assert_refused(result, f"{journal}: journal: cannot be read (")
    assert (
        "(database disk image is malformed)" in result.stderr
        or "(text that is not UTF-8 where text is kept)" in result.stderr
    ), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
