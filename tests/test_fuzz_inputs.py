"""Generated garbage fed to every parser of the CLI's input: job files (.jsonl, .toml),
config files and argv. Each either loads or raises `InputError` (the CLI's exit 2, a message
naming file, line and field), never anything else; a few go through the real CLI as a subprocess
and must exit 2 with no traceback.

Most cases run in-process (hundreds a second); hypothesis runs derandomized and keeps no
database, so the suite is the same on every machine.
"""

from __future__ import annotations

import argparse
import json
import string
from pathlib import Path

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from swarm_tui.cli import build_parser
from swarm_tui.cli.request import resume_request, run_request
from swarm_tui.config import load_config
from swarm_tui.core.errors import InputError
from swarm_tui.jobs import MAX_TASKS, load_job
from swarm_tui.jobs.chat_checks import PARAM_CHECKS
from swarm_tui.jobs.swarm_toml import REQUEST_KEYS
from swarm_tui.jobs.toml_tasks import TASKS_KEYS
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.run.resolve import resolve_profile, resolve_settings

from tests.conftest import run_cli

FAST = settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

# --------------------------------------------------------------------------- values

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["", "{agent}", "{agent:999999999}", "{x}", "}", "{", "sim-1", "user"]),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)
toml_scalars = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["", "{agent}", "{agent:999999999}", "{index:c}", "a-{agent}", "same"]),
)
toml_values = st.recursive(
    toml_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=10,
)
counts = st.one_of(st.integers(-3, 40), st.integers(MAX_TASKS + 1, 10**15), toml_scalars)
"""A `count` stays small when valid (a valid job renders every task) or is past the limit."""


def _keyed(keys, values, max_size: int = 4):
    """A table of some of `keys` (and now and then a stranger) with generated values."""
    return st.dictionaries(st.one_of(st.sampled_from(sorted(keys)), st.text(max_size=6)), values, max_size=max_size)


# --------------------------------------------------------------------------- job files

messages = st.lists(
    st.one_of(
        st.fixed_dictionaries(
            {
                "role": st.sampled_from(["user", "system", "assistant", "tool", "x"]),
                "content": st.one_of(st.text(max_size=20), json_values),
            }
        ),
        json_values,
    ),
    max_size=3,
)
bodies = st.one_of(
    st.fixed_dictionaries(
        {"model": st.one_of(st.just("sim-1"), json_values), "messages": messages},
        optional={key: json_values for key in sorted(PARAM_CHECKS)[:8] + ["stream"]},
    ),
    _keyed(set(PARAM_CHECKS) | {"model", "messages"}, json_values),
    json_values,
)
batch_lines = st.one_of(
    st.fixed_dictionaries(
        {
            "custom_id": st.one_of(st.sampled_from(["a", "b", "a"]), json_values),
            "method": st.sampled_from(["POST", "GET", 3]),
            "url": st.sampled_from(["/v1/chat/completions", "/x", None]),
            "body": bodies,
        }
    ),
    json_values,
)
jsonl_texts = st.lists(
    st.one_of(
        batch_lines.map(lambda v: json.dumps(v, ensure_ascii=False)),
        st.text(max_size=40),
        st.sampled_from(
            [
                "",
                "{",
                "NaN",
                '{"custom_id": "a", "body": {"model": "m", "messages": [{"role": "user", "content": "hi"}]}}',
                "\ufeff{}",
                "[]",
            ]
        ),
    ),
    max_size=6,
).map("\n".join)

toml_docs = st.fixed_dictionaries(
    {},
    optional={
        "name": toml_values,
        "model": st.one_of(st.just("sim-1"), toml_values),
        "system": toml_values,
        "context": st.one_of(toml_values, _keyed({"text", "file"}, toml_values)),
        "request": _keyed(REQUEST_KEYS, toml_values),
        "tasks": st.one_of(
            toml_values,
            st.fixed_dictionaries({"count": counts}, optional={"prompt": toml_values, "id": toml_values}),
            _keyed(TASKS_KEYS, toml_values),
        ),
        "task": st.one_of(toml_values, st.lists(_keyed({"id", "prompt"}, toml_values), max_size=4)),
        "goal": toml_values,
        "lane": st.one_of(st.sampled_from(["live", "batch", "auto", "x"]), toml_values),
        "plan": _keyed({"agents", "system", "max_tokens"}, toml_values),
        "workers": _keyed({"prompt", "json", "warmup"}, toml_values),
        "aggregate": _keyed({"prompt", "json", "max_tokens", "chunk_tokens"}, toml_values),
        "memory": _keyed({"rounds", "window", "context_tokens"}, toml_values),
        "tools": st.one_of(
            toml_values,
            _keyed(
                {"mcp", "python"},
                st.lists(_keyed({"name", "command", "url", "env", "function"}, toml_values), max_size=2),
            ),
        ),
        "agents": _keyed({"max_steps", "tool_timeout"}, toml_values),
        "judge": _keyed({"endpoint", "model", "rate", "rubric", "action", "drop", "window"}, toml_values),
        "extra": toml_values,
    },
)


def _toml_text(doc: dict) -> str | None:
    try:
        return tomli_w.dumps(doc)
    except (TypeError, ValueError):  # a value TOML cannot hold (NaN is fine, None is not)
        return None


def _loads_or_refuses(load, path: Path):
    try:
        return load(path)
    except InputError as exc:
        text = str(exc)
        assert text and str(path) in text, text  # every problem names the file
        return None


def _assert_runnable(job) -> None:
    """A job that loads can be journaled: one id per task, within the limit."""
    if job is not None:
        ids = [task.custom_id for task in job.tasks]
        assert len(ids) == len(set(ids)) and len(ids) <= MAX_TASKS


@FAST
@given(text=jsonl_texts)
def test_a_batch_jsonl_job_loads_or_is_refused(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("j") / "job.jsonl"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    _assert_runnable(_loads_or_refuses(load_job, path))


@FAST
@given(doc=toml_docs)
def test_a_toml_job_loads_or_is_refused(tmp_path_factory, doc):
    text = _toml_text(doc)
    if text is None:
        return
    path = tmp_path_factory.mktemp("t") / "job.toml"
    path.write_text(text, encoding="utf-8")
    _assert_runnable(_loads_or_refuses(load_job, path))


templates = st.one_of(st.text(alphabet="{}:.,<>^=+-#!0123456789agentidxotalrsfc[]_ ", max_size=16), toml_values)
near_valid_jobs = st.fixed_dictionaries(
    {
        "model": st.just("sim-1"),
        "tasks": st.fixed_dictionaries({"count": st.integers(1, 12), "prompt": templates}, optional={"id": templates}),
    },
    optional={"system": templates, "task": st.lists(_keyed({"id", "prompt"}, templates), max_size=3)},
)


@FAST
@given(doc=near_valid_jobs)
def test_a_templated_toml_job_loads_or_is_refused(tmp_path_factory, doc):
    """Jobs one step from valid: what their templates render (ids, prompts, the system prompt)."""
    text = _toml_text(doc)
    if text is None:
        return
    path = tmp_path_factory.mktemp("v") / "job.toml"
    path.write_text(text, encoding="utf-8")
    _assert_runnable(_loads_or_refuses(load_job, path))


@FAST
@given(data=st.binary(max_size=200), suffix=st.sampled_from([".jsonl", ".toml"]))
def test_any_bytes_as_a_job_load_or_are_refused(tmp_path_factory, data, suffix):
    path = tmp_path_factory.mktemp("b") / f"job{suffix}"
    path.write_bytes(data)
    _loads_or_refuses(load_job, path)


# --------------------------------------------------------------------------- config files

profile_tables = _keyed(
    {
        "base_url",
        "model",
        "api_key_env",
        "concurrency",
        "rpm",
        "tpm",
        "timeout",
        "backend",
        "fallback_base_url",
        "fallback_model",
        "fallback_api_key_env",
        "api_key",
    },
    st.one_of(toml_values, st.sampled_from(["http://127.0.0.1:8000/v1", "RELAY_KEY", "httpx"])),
)
config_docs = st.fixed_dictionaries(
    {},
    optional={
        "providers": st.one_of(
            toml_values, st.dictionaries(st.sampled_from(["relay", "sim", "x"]), profile_tables, max_size=2)
        ),
        "defaults": st.one_of(
            toml_values,
            _keyed(
                {"provider", "theme", "currency", "currency_rate"},
                st.one_of(toml_values, st.sampled_from(["sim", "relay", "CNY", "USD"])),
            ),
        ),
        "prices": st.one_of(
            toml_values,
            st.dictionaries(
                st.sampled_from(["custom/m", "relay/x", "bad"]),
                _keyed({"input", "cached_input", "output"}, toml_values),
                max_size=2,
            ),
        ),
        "billing": st.one_of(
            toml_values,
            st.dictionaries(st.sampled_from(["relay", "x"]), _keyed({"CNY", "USD", "source"}, toml_values), max_size=2),
        ),
        "keys": st.one_of(toml_values, _keyed({"app.retry_failed", "grid", "x"}, toml_values)),
        "other": toml_values,
    },
)


@FAST
@given(doc=config_docs)
def test_a_config_file_loads_or_is_refused(tmp_path_factory, doc):
    text = _toml_text(doc)
    if text is None:
        return
    path = tmp_path_factory.mktemp("c") / "config.toml"
    path.write_text(text, encoding="utf-8")
    _loads_or_refuses(load_config, path)


@FAST
@given(data=st.binary(max_size=200))
def test_any_bytes_as_a_config_load_or_are_refused(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("cb") / "config.toml"
    path.write_bytes(data)
    _loads_or_refuses(load_config, path)


# --------------------------------------------------------------------------- argv

RUN_OPTIONS = [
    "--concurrency",
    "--max-attempts",
    "--timeout",
    "--max-retry-after",
    "--rpm",
    "--tpm",
    "--max-answer-bytes",
    "--ttft-timeout",
    "--idle-timeout",
    "--budget",
    "--fail-on-error",
    "--lane",
    "--live-share",
    "--batch-poll",
    "--model",
    "--api-key-env",
    "--backend",
    "--base-url",
    "--provider",
    "--fallback-base-url",
    "--fallback-model",
    "--fallback-api-key-env",
    "--sim-latency-ms",
    "--sim-error-rate",
    "--sim-hang-rate",
    "--sim-seed",
    "--sim-drift",
    "--sim-schema-break-rate",
    "--sim-length-rate",
    "--sim-refusal-rate",
    "--sim-content-filter-rate",
    "--judge-rate",
    "--judge-drop",
]
FLAGS = ["--stream", "--hedge", "--no-adaptive", "--headless"]
arg_values = st.one_of(
    st.sampled_from(
        [
            "0",
            "-1",
            "1",
            "0.5",
            "1e309",
            "nan",
            "inf",
            "",
            "x",
            "batch",
            "httpx",
            "http://127.0.0.1:9/v1",
            "sk-abcdefghijklmnopqrstuvwx",
            "RELAY_KEY",
            "sim",
            "99999999999999999999999",
        ]
    ),
    st.text(string.printable, max_size=12),
)
argvs = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(RUN_OPTIONS), arg_values).map(list),
        st.sampled_from(FLAGS).map(lambda f: [f]),
        arg_values.map(lambda v: [v]),
    ),
    max_size=5,
).map(lambda parts: [a for part in parts for a in part])


@FAST
@given(command=st.sampled_from(["run", "resume"]), argv=argvs)
def test_run_and_resume_options_parse_or_exit_2(command, argv, capsys):
    words = [command, *(["RUN_DIR"] if command == "resume" else []), *argv]
    try:
        args = build_parser().parse_args(words)
    except SystemExit as exc:
        assert exc.code == 2, words  # argparse's usage error
        assert "error:" in capsys.readouterr().err
        return
    assert isinstance(args, argparse.Namespace)
    options = (resume_request if command == "resume" else run_request)(args).options
    try:
        profile = resolve_profile(options.provider, load_config(Path("/nonexistent/config.toml")))
        resolve_settings(options.engine, profile or ProviderProfile(name="sim"))
    except InputError as exc:
        assert str(exc)


# --------------------------------------------------------------------------- through the real CLI


@settings(
    max_examples=2,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(doc=toml_docs.filter(lambda d: _toml_text(d) is not None), text=jsonl_texts)
def test_the_cli_refuses_a_garbage_job_with_exit_2_and_no_traceback(tmp_path_factory, doc, text):
    root = tmp_path_factory.mktemp("cli")
    toml_job, jsonl_job = root / "job.toml", root / "job.jsonl"
    toml_job.write_text(_toml_text(doc) + "\n[[task]]\nid = 3\n", encoding="utf-8")  # never a valid job
    jsonl_job.write_text(text + "\n{", encoding="utf-8", errors="surrogatepass")  # nor this one
    for job in (toml_job, jsonl_job):
        result = run_cli("run", str(job), "--headless", "--out", str(root / "run"), timeout=60)
        assert result.returncode == 2, result.stderr
        assert "Traceback" not in result.stderr and str(job) in result.stderr, result.stderr
        assert not (root / "run").exists()


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(doc=toml_docs.filter(lambda d: _toml_text(d) is not None), text=jsonl_texts, argv=argvs)
def test_the_cli_entry_refuses_any_garbage_job_under_any_options_in_one_line(tmp_path_factory, doc, text, argv, capsys):
    """The CLI's own entry (`main`, what `swarm-tui` runs), in this process so that hypothesis can
    try many cases (the subprocess test above tries two): a job that can never be valid, under any
    options, ends in exit 2 and one message naming the job or the option, with no exception out of
    `main` (a traceback) and no run directory made."""
    from swarm_tui.cli import main

    root = tmp_path_factory.mktemp("entry")
    toml_job, jsonl_job = root / "job.toml", root / "job.jsonl"
    toml_job.write_text(_toml_text(doc) + "\n[[task]]\nid = 3\n", encoding="utf-8")
    jsonl_job.write_text(text + "\n{", encoding="utf-8", errors="surrogatepass")
    for job in (toml_job, jsonl_job):
        try:
            code = main(["run", str(job), "--headless", "--out", str(root / "run"), *argv])
        except SystemExit as exc:  # argparse's usage error
            code = exc.code
        err = capsys.readouterr().err
        assert code == 2, (argv, err)
        assert "Traceback" not in err and err.strip(), (argv, err)
        assert not (root / "run").exists(), argv


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--headless", "--concurrency", "1e309"],
        ["run", "--headless", "--max-answer-bytes", "-1"],
        ["resume"],
        ["resume", "/nonexistent/run"],
        ["providers", "test"],
        ["attach", "/nonexistent/run"],
    ],
)
def test_the_cli_refuses_bad_argv_with_exit_2_and_no_traceback(argv):
    result = run_cli(*argv, timeout=60)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
