"""Bad input is refused before anything is sent: exit 2, `file:line: field: problem`,
no traceback, no request, no run directory; and a valid file is never refused."""

from __future__ import annotations

import argparse
import json

import pytest
from swarm_tui.core.errors import InputError
from swarm_tui.jobs import load_job, toml_checks
from swarm_tui.sim import SimConfig, add_arguments, config_from_args
from swarm_tui.sim.args import non_negative_float, share

from tests.conftest import run_cli


def batch_line(custom_id: str = "a", **body) -> str:
    body = {"model": "sim-1", "messages": [{"role": "user", "content": "hi"}], **body}
    return json.dumps(
        {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}, ensure_ascii=False
    )


def problems_of(path) -> str:
    with pytest.raises(InputError) as caught:
        load_job(path)
    return str(caught.value)


def assert_refused(result, sim, out, *expected: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    for text in expected:
        assert text in result.stderr, result.stderr
    assert sim.stats()["requests"] == 0
    assert not out.exists()


# --------------------------------------------------------------------------- through the real CLI

TOML_HEAD = 'name = "x"\nmodel = "sim-1"\n'


def _directory_job(tmp_path):
    path = tmp_path / "x.jsonl"
    path.mkdir()
    return path, [f"{path}: job: is a directory"]


def _latin1_toml(tmp_path):
    path = tmp_path / "job.toml"
    path.write_bytes((TOML_HEAD + 'system = "café"\n[tasks]\ncount = 2\nprompt = "p"\n').encode("latin-1"))
    return path, [f"{path}:3: encoding: not UTF-8 text: byte 0xe9 at column 14"]


def _latin1_jsonl(tmp_path):
    path = tmp_path / "job.jsonl"
    path.write_bytes((batch_line("a") + "\n" + batch_line("b").replace("hi", "olé") + "\n").encode("latin-1"))
    return path, [f"{path}:2: encoding: not UTF-8 text: byte 0xe9"]


def _toml_typo_top_level(tmp_path):
    path = tmp_path / "job.toml"
    path.write_text('name = "x"\nmodle = "sim-1"\n[tasks]\ncount = 2\nprompt = "p"\n')
    return path, [f"{path}:2: modle: unknown key, did you mean 'model'?"]


def _toml_typo_in_tasks(tmp_path):
    path = tmp_path / "job.toml"
    path.write_text(TOML_HEAD + '[tasks]\ncount = 2\npromt = "p"\n')
    return path, [f"{path}:5: tasks.promt: unknown key, did you mean 'prompt'?"]


def _toml_bool_max_tokens(tmp_path):
    path = tmp_path / "job.toml"
    path.write_text(TOML_HEAD + '[request]\nmax_tokens = true\n[tasks]\ncount = 2\nprompt = "p"\n')
    return path, [f"{path}:4: request.max_tokens: must be a positive integer, not True"]


def _toml_hot_temperature(tmp_path):
    path = tmp_path / "job.toml"
    path.write_text(TOML_HEAD + '[request]\ntemperature = "hot"\n[tasks]\ncount = 2\nprompt = "p"\n')
    return path, [f"{path}:4: request.temperature: must be a number from 0 to 2, not 'hot'"]


def _jsonl_hot_temperature(tmp_path):
    path = tmp_path / "job.jsonl"
    path.write_text("\n".join([batch_line("a"), batch_line("b", temperature="hot")]) + "\n")
    return path, [f"{path}:2: body.temperature: must be a number from 0 to 2, not 'hot'"]


def _jsonl_numeric_content(tmp_path):
    path = tmp_path / "job.jsonl"
    path.write_text("\n".join([batch_line("a"), batch_line("b", messages=[{"role": "user", "content": 12345}])]) + "\n")
    return path, [f"{path}:2: body.messages[0].content: must be a string or a list of content parts, not 12345"]


@pytest.mark.parametrize(
    "make_job",
    [
        _directory_job,
        _latin1_toml,
        _latin1_jsonl,
        _toml_typo_top_level,
        _toml_typo_in_tasks,
        _toml_bool_max_tokens,
        _toml_hot_temperature,
        _jsonl_hot_temperature,
        _jsonl_numeric_content,
    ],
    ids=lambda f: f.__name__.lstrip("_"),
)
def test_cli_refuses_bad_job_with_exit_2_and_sends_nothing(tmp_path, sim, make_job):
    path, expected = make_job(tmp_path)
    out = tmp_path / "run"
    result = run_cli("run", str(path), "--headless", "--base-url", sim.base_url, "--out", str(out))
    assert_refused(result, sim, out, *expected)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--error-rate", "5"], "argument --error-rate: must be a share between 0 and 1"),
        (["--error-rate", "-1"], "argument --error-rate: must be a share between 0 and 1"),
        (["--latency-ms", "-100"], "argument --latency-ms: must be >= 0"),
        (["--hang-rate", "2"], "argument --hang-rate: must be a share between 0 and 1"),
        (["--error-rate", "0.6", "--hang-rate", "0.5"], "add up to 1.1; together they must not exceed 1"),
        (["--output-tokens", "9:3"], "argument --output-tokens: must be MIN:MAX with 1 <= MIN <= MAX"),
    ],
)
def test_cli_sim_refuses_out_of_range_flags(flags, message):
    result = run_cli("sim", "--port", "0", *flags, timeout=30)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert "listening" not in result.stdout


# --------------------------------------------------------------------------- JSONL


@pytest.mark.parametrize(
    "body, field, message",
    [
        ({"temperature": "hot"}, "temperature", "must be a number from 0 to 2, not 'hot'"),
        ({"temperature": 3}, "temperature", "must be a number from 0 to 2"),
        ({"top_p": 1.5}, "top_p", "must be a number from 0 to 1"),
        ({"n": 0}, "n", "must be a positive integer"),
        ({"max_tokens": True}, "max_tokens", "must be a positive integer, not True"),
        ({"max_completion_tokens": "64"}, "max_completion_tokens", "must be a positive integer, not '64'"),
        ({"presence_penalty": "x"}, "presence_penalty", "must be a number from -2 to 2"),
        ({"frequency_penalty": -3}, "frequency_penalty", "must be a number from -2 to 2"),
        ({"seed": 1.5}, "seed", "must be an integer"),
        ({"seed": False}, "seed", "must be an integer"),
        ({"stop": ["ok", 1]}, "stop", "must be a string or a list of strings"),
        ({"logprobs": "yes"}, "logprobs", "must be true or false"),
        ({"top_logprobs": 50}, "top_logprobs", "must be an integer from 0 to 20"),
        ({"response_format": "json"}, "response_format", "must be an object with a string type"),
        ({"extra_body": ["x"]}, "extra_body", "must be an object"),
        ({"tools": {"type": "function"}}, "tools", "must be a list of tool objects"),
        ({"stream": True}, "stream", "set streaming with --stream"),
        ({"stream_options": {"include_usage": True}}, "stream_options", "set streaming with --stream"),
        (
            {"messages": [{"role": "user", "content": 12345}]},
            "messages[0].content",
            "must be a string or a list of content parts, not 12345",
        ),
        (
            {"messages": [{"role": "user", "content": None}]},
            "messages[0].content",
            "may be null only in an assistant message with tool_calls",
        ),
        (
            {"messages": [{"role": "user", "content": [{"text": "no type"}]}]},
            "messages[0].content[0]",
            "must be a content part object with a string type",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]},
            "messages[0].content[0].text",
            "must be a string",
        ),
        (
            {"messages": [{"role": "tool", "content": "42"}]},
            "messages[0].tool_call_id",
            "a tool message needs the string id of the call it answers",
        ),
        ({"messages": [{"role": "user", "content": "hi", "name": 7}]}, "messages[0].name", "must be a string"),
    ],
)
def test_jsonl_body_types_the_api_would_refuse(tmp_path, body, field, message):
    path = tmp_path / "job.jsonl"
    path.write_text(batch_line("ok") + "\n" + batch_line("bad", **body) + "\n")
    assert f"{path}:2: body.{field}: {message}" in problems_of(path)


def test_jsonl_bodies_the_api_accepts_still_load(tmp_path):
    path = tmp_path / "job.jsonl"
    lines = [
        batch_line("nulls", temperature=None, top_p=None, stop=None, seed=None),
        batch_line(
            "types",
            temperature=0,
            top_p=1,
            n=1,
            seed=-3,
            stop=["a", "b"],
            presence_penalty=-2.0,
            logprobs=True,
            top_logprobs=0,
            response_format={"type": "json_object"},
            stream=False,
            extra_body={"swarm_id": "s"},
            vendor_extension={"anything": 1},
        ),
        batch_line(
            "parts",
            messages=[
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {"url": "u"}}],
                }
            ],
        ),
        batch_line(
            "tools",
            messages=[
                {"role": "user", "content": "weather?"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
            ],
        ),
    ]
    path.write_text("\n".join(lines) + "\n")
    assert [t.custom_id for t in load_job(path).tasks] == ["nulls", "types", "parts", "tools"]


def test_jsonl_u2028_is_one_line_and_later_line_numbers_hold(tmp_path):
    path = tmp_path / "job.jsonl"
    odd = batch_line("odd", messages=[{"role": "user", "content": "a\u2028b\u2029c\x85d\x0ce"}])
    assert "\u2028" in odd  # legal JSON, written raw
    path.write_text("\n".join([odd, batch_line("b"), batch_line("c", temperature="hot")]) + "\n", encoding="utf-8")
    text = problems_of(path)
    assert f"{path}:3: body.temperature:" in text and len(text.splitlines()) == 1
    path.write_text("\n".join([odd, batch_line("b")]) + "\n", encoding="utf-8")
    job = load_job(path)
    assert job.tasks[0].prompt == "a\u2028b\u2029c\x85d\x0ce" and len(job.tasks) == 2


def test_jsonl_crlf_and_byte_order_mark(tmp_path):
    path = tmp_path / "job.jsonl"
    path.write_bytes(
        ("\ufeff" + "\r\n".join([batch_line("a"), batch_line("b"), batch_line("c", n=0)]) + "\r\n").encode("utf-8")
    )
    assert f"{path}:3: body.n: must be a positive integer" in problems_of(path)
    path.write_bytes(("\ufeff" + "\r\n".join([batch_line("a"), batch_line("b")]) + "\r\n").encode("utf-8"))
    assert [t.custom_id for t in load_job(path).tasks] == ["a", "b"]


def test_jsonl_nan_is_not_json(tmp_path):
    path = tmp_path / "job.jsonl"
    path.write_text(batch_line("a") + "\n" + batch_line("b").replace('"model"', '"temperature": NaN, "model"') + "\n")
    assert f"{path}:2: json: NaN is not valid JSON" in problems_of(path)


def test_a_directory_named_like_a_job_is_an_input_error(tmp_path):
    for name in ("x.jsonl", "x.toml"):
        (tmp_path / name).mkdir()
        assert f"{tmp_path / name}: job: is a directory" in problems_of(tmp_path / name)


# --------------------------------------------------------------------------- TOML


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            'name = "x"\nmodle = "m"\n[tasks]\ncount = 1\nprompt = "p"\n',
            ":2: modle: unknown key, did you mean 'model'?",
        ),
        (
            TOML_HEAD + 'sytem = "s"\n[tasks]\ncount = 1\nprompt = "p"\n',
            ":3: sytem: unknown key, did you mean 'system'?",
        ),
        (
            TOML_HEAD + '[reqeust]\nmax_tokens = 5\n[tasks]\ncount = 1\nprompt = "p"\n',
            ":3: reqeust: unknown key, did you mean 'request'?",
        ),
        (
            TOML_HEAD + '[tasks]\ncount = 1\nprompt = "p"\ncuont = 3\n',
            ":6: tasks.cuont: unknown key, did you mean 'count'?",
        ),
        (TOML_HEAD + '[tasks]\ncount = 2\npromt = "p"\n', ":5: tasks.promt: unknown key, did you mean 'prompt'?"),
        (
            TOML_HEAD + '[[task]]\nid = "a"\nprompt = "p"\n[[task]]\nid = "b"\npromt = "p"\n',
            ":8: task[1].promt: unknown key, did you mean 'prompt'?",
        ),
        (
            TOML_HEAD + '[context]\nfiel = "brief.md"\n[tasks]\ncount = 1\nprompt = "p"\n',
            ":4: context.fiel: unknown key, did you mean 'file'?",
        ),
        (
            TOML_HEAD + '[request]\nmax_token = 5\n[tasks]\ncount = 1\nprompt = "p"\n',
            ":4: request.max_token: unknown request parameter, did you mean 'max_tokens'?",
        ),
        (
            TOML_HEAD + 'zzz = 1\n[tasks]\ncount = 1\nprompt = "p"\n',
            ":3: zzz: unknown key (known: agents, aggregate, answer, cache, context",
        ),
        (
            TOML_HEAD + '[request]\nmax_tokens = true\n[tasks]\ncount = 1\nprompt = "p"\n',
            ":4: request.max_tokens: must be a positive integer, not True",
        ),
        (
            TOML_HEAD + '[request]\ntemperature = "hot"\n[tasks]\ncount = 1\nprompt = "p"\n',
            ":4: request.temperature: must be a number from 0 to 2, not 'hot'",
        ),
        (TOML_HEAD + '[request]\ntop_p = 2\n[tasks]\ncount = 1\nprompt = "p"\n', ":4: request.top_p: must be a number"),
        (
            TOML_HEAD + '[request]\nseed = 1.5\n[tasks]\ncount = 1\nprompt = "p"\n',
            ":4: request.seed: must be an integer",
        ),
        (
            TOML_HEAD + '[request]\nstop = ["a", 1]\n[tasks]\ncount = 1\nprompt = "p"\n',
            ":4: request.stop: must be a string or a list of strings",
        ),
        (
            TOML_HEAD + '[request]\nresponse_format = "json"\n[tasks]\ncount = 1\nprompt = "p"\n',
            ":4: request.response_format: must be an object",
        ),
    ],
)
def test_toml_unknown_keys_and_wrong_types_name_file_line_field(tmp_path, text, expected):
    path = tmp_path / "job.toml"
    path.write_text(text)
    assert f"{path}{expected}" in problems_of(path)


def test_toml_lines_ignore_lookalikes_inside_multiline_strings(tmp_path):
    path = tmp_path / "job.toml"
    path.write_text(
        TOML_HEAD + '[context]\ntext = """\n[request]\ntemperature = 1\n"""\n\n'
        '[request]\ntemperature = "hot"\n[[task]]\nid = "a"\nprompt = "p"\n[[task]]\nid = "a"\n'
        'prompt = "q"\n'
    )
    text = problems_of(path)
    assert f"{path}:10: request.temperature: must be a number" in text
    assert f"{path}:15: task[1].id: missing, empty or duplicate: 'a'" in text


def test_toml_u2028_crlf_and_bom_keep_line_numbers(tmp_path):
    path = tmp_path / "job.toml"
    text = TOML_HEAD + 'system = "a\u2028b\x85c"\n[request]\ntemperature = "hot"\n[tasks]\ncount = 1\nprompt = "p"\n'
    path.write_bytes(("\ufeff" + text.replace("\n", "\r\n")).encode("utf-8"))
    assert f"{path}:5: request.temperature:" in problems_of(path)
    path.write_bytes(("\ufeff" + text.replace('"hot"', "0.5").replace("\n", "\r\n")).encode("utf-8"))
    assert load_job(path).template.system == "a\u2028b\x85c"


def test_toml_context_file_not_utf8_is_a_problem(tmp_path):
    (tmp_path / "brief.md").write_bytes("café".encode("latin-1"))
    path = tmp_path / "job.toml"
    path.write_text(TOML_HEAD + '[context]\nfile = "brief.md"\n[tasks]\ncount = 1\nprompt = "p"\n')
    assert f"{path}:4: context.file:" in problems_of(path) and "not UTF-8" in problems_of(path)


def _big_toml(path, n: int, *, broken: bool) -> None:
    parts = [TOML_HEAD, "[request]\nmax_tokens = 64\n"]
    parts += [f'[[task]]\nid = "t{i}"\nprompt = "do {i} as {{agent}}"\n' for i in range(n)]
    if broken:
        parts.append('[[task]]\nid = "last"\npromt = "typo"\n')
    path.write_text("".join(parts))


def test_toml_fields_are_located_from_one_index(tmp_path, monkeypatch):
    """Locating a field never rescans the file: the line index is built once, and only when a
    problem needs a line (a valid job does not pay for it)."""
    built = []
    real = toml_checks.TomlLines
    monkeypatch.setattr(toml_checks, "TomlLines", lambda lines: built.append(1) or real(lines))
    path = tmp_path / "big.toml"
    _big_toml(path, 300, broken=False)
    assert len(load_job(path).tasks) == 300 and built == []
    path.write_text(path.read_text() + "".join(f'[[task]]\nid = "x{i}"\nmodle = 1\n' for i in range(40)))
    text = problems_of(path)
    assert built == [1]
    assert f"{path}:{2 + 2 + 300 * 3 + 3}: task[300].modle: unknown key" in text


def test_a_large_toml_job_loads_and_names_the_right_line(tmp_path):
    """4,000 [[task]] entries (~14 s when each entry rescanned the file). Linear time is guarded by
    the index-built-once test above, not by a clock here; the benchmarks measure it."""
    path = tmp_path / "big.toml"
    for broken in (False, True):
        _big_toml(path, 4000, broken=broken)
        if broken:
            assert f"{path}:{2 + 2 + 4000 * 3 + 3}: task[4000].promt:" in problems_of(path)
        else:
            assert len(load_job(path).tasks) == 4000


# --------------------------------------------------------------------------- simulator settings


@pytest.mark.parametrize(
    "fields, name",
    [
        ({"error_rate": 5}, "error_rate"),
        ({"error_rate": -1}, "error_rate"),
        ({"hang_rate": 2}, "hang_rate"),
        ({"latency_ms": -100}, "latency_ms"),
        ({"latency_ms": float("nan")}, "latency_ms"),
        ({"latency_sigma": "0.5"}, "latency_sigma"),
        ({"hang_s": float("inf")}, "hang_s"),
        ({"burst_s": float("nan")}, "burst_s"),
        ({"error_rate": 0.6, "hang_rate": 0.6}, "error_rate + hang_rate"),
        ({"rpm": True}, "rpm"),
        ({"tpm": 1.5}, "tpm"),
        ({"seed": "7"}, "seed"),
        ({"context_window": 0}, "context_window"),
        ({"cache_min_tokens": -1}, "cache_min_tokens"),
        ({"output_tokens": (5, 2)}, "output_tokens"),
        ({"output_tokens": "3"}, "output_tokens"),
        ({"models": "sim-1"}, "models"),
        ({"models": ()}, "models"),
        ({"down": "no"}, "down"),
        ({"require_key": 123}, "require_key"),
    ],
)
def test_sim_config_names_the_bad_field(fields, name):
    with pytest.raises(ValueError, match=name.replace("+", r"\+")):
        SimConfig(**fields)


def test_sim_config_patch_from_json_names_the_bad_field():
    with pytest.raises(ValueError, match="latency_ms"):
        SimConfig().patched({"latency_ms": 10**400})
    assert SimConfig().patched({"latency_ms": 0, "rpm": 0, "output_tokens": "3:5"}).output_tokens == (3, 5)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--error-rate", "5"], "argument --error-rate: must be a share between 0 and 1"),
        (["--hang-rate", "-0.1"], "argument --hang-rate: must be a share"),
        (["--stream-stall-rate", "1.5"], "argument --stream-stall-rate: must be a share"),
        (["--latency-ms", "-100"], "argument --latency-ms: must be >= 0, not -100"),
        (["--latency-ms", "inf"], "argument --latency-ms: must be a finite number"),
        (["--burst-s", "0"], "argument --burst-s: must be > 0"),
        (["--rpm", "-5"], "argument --rpm: must be an integer >= 0"),
        (["--context-window", "0"], "argument --context-window: must be an integer >= 1"),
        (["--port", "70000"], "argument --port: must be a port from 0 to 65535"),
        (["--models", ","], "argument --models: must name at least one model"),
        (["--hang-rate", "0.5", "--error-rate", "0.7"], "add up to 1.2"),
    ],
)
def test_sim_flags_are_refused_by_argparse(capsys, flags, message):
    parser = argparse.ArgumentParser(prog="sim")
    add_arguments(parser)
    with pytest.raises(SystemExit) as caught:
        parser.parse_args(flags)
    assert caught.value.code == 2
    assert message in capsys.readouterr().err


def test_sim_flags_in_range_still_parse():
    parser = argparse.ArgumentParser(prog="sim")
    add_arguments(parser)
    ns = parser.parse_args(
        [
            "--error-rate",
            "0.5",
            "--hang-rate",
            "0.5",
            "--latency-ms",
            "0",
            "--rpm",
            "0",
            "--output-tokens",
            "4,9",
            "--port",
            "0",
        ]
    )
    cfg = config_from_args(ns)
    assert (cfg.error_rate, cfg.hang_rate, cfg.latency_ms, cfg.rpm, cfg.output_tokens) == (0.5, 0.5, 0.0, None, (4, 9))


def test_argparse_types_for_other_clis():
    assert share("0") == 0.0 and share("1") == 1.0 and share("0.05") == 0.05
    assert non_negative_float("0") == 0.0 and non_negative_float("12.5") == 12.5
    for bad in ("5", "-1", "nan", "x"):
        with pytest.raises(argparse.ArgumentTypeError):
            share(bad)
    for bad in ("-100", "inf", "nan", "x"):
        with pytest.raises(argparse.ArgumentTypeError):
            non_negative_float(bad)


# --------------------------------------------------------------------------- a key's value


@pytest.mark.parametrize(
    "value, cause",
    [
        ("sk-crlf-0123456789abcdefABCDEF\r", "ends with a carriage return"),
        ("sk-lf-0123456789abcdefABCDEF\n", "ends with a line feed"),
        ("sk-tab-0123\t456789abcdefABCDEF", "a tab"),
    ],
    ids=["cr", "lf", "tab"],
)
def test_a_key_variable_with_a_control_character_is_refused_naming_it_before_anything_is_sent(
    tmp_path, sim, value, cause
):
    """A CRLF `.env` file leaves a `\\r` at the end of every value: each call then fails on the
    header ("Forbidden control character"), retried, and the variable is never named."""
    job = tmp_path / "job.jsonl"
    job.write_text(batch_line("a") + "\n")
    out = tmp_path / "run"
    result = run_cli(
        "run",
        str(job),
        "--headless",
        "--base-url",
        sim.base_url,
        "--api-key-env",
        "RELAY_KEY",
        "--out",
        str(out),
        env={"RELAY_KEY": value},
    )
    assert_refused(result, sim, out, "RELAY_KEY", cause)
    assert value.strip() not in result.stderr, "the key is never shown"


def test_a_header_variable_with_a_control_character_is_refused_naming_it(tmp_path, sim, monkeypatch):
    from swarm_tui.providers.client import preflight
    from swarm_tui.providers.profile import ProviderProfile

    monkeypatch.setenv("AZURE_KEY", "0123456789abcdef0123456789abcdef\r\n")
    profile = ProviderProfile("azure", base_url=sim.base_url, headers_env={"api-key": "AZURE_KEY"})
    with pytest.raises(InputError) as caught:
        preflight(profile, sim.base_url)
    text = str(caught.value)
    assert "AZURE_KEY" in text and "ends with a carriage return and a line feed" in text, text
    assert "0123456789abcdef" not in text
