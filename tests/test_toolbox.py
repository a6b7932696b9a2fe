"""The toolbox: Python functions as tools (schemas from type hints), and every way a call can
go wrong coming back to the model as the tool's result, never as an exception."""

from __future__ import annotations

import asyncio
import json

import pytest
from swarm_tui.core.errors import InputError
from swarm_tui.jobs import load_job, load_tools_file
from swarm_tui.tools import Toolbox, ToolSetupError
from swarm_tui.tools.spec import PythonToolSpec, ToolsSpec
from swarm_tui.tools.transcript import pending_tool_calls, steps_taken


def python_tools(*names: str, timeout: float = 5.0) -> ToolsSpec:
    return ToolsSpec(
        python=tuple(PythonToolSpec(f"tests.agent_tools:{n}", where=f"tools.python[{i}]") for i, n in enumerate(names)),
        tool_timeout_s=timeout,
        source="job.toml",
    )


async def test_python_functions_become_tools_with_schemas_from_their_hints():
    toolbox = Toolbox(python_tools("lookup", "add", "pick"))
    await toolbox.start()
    schemas = {t["function"]["name"]: t["function"] for t in toolbox.openai_tools()}
    assert schemas["lookup"]["description"] == "Look a term up in a tiny glossary."
    assert schemas["lookup"]["parameters"] == {
        "type": "object",
        "properties": {"term": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["term"],
    }
    assert schemas["pick"]["parameters"]["properties"] == {
        "colour": {"enum": ["red", "green"]},
        "tags": {"type": "array", "items": {"type": "string"}},
    }
    assert (await toolbox.call("add", '{"a": 2, "b": 3.5}')).text == "5.5"
    picked = await toolbox.call("pick", '{"colour": "red"}')
    assert picked.ok and json.loads(picked.text) == {"colour": "red", "tags": []}
    await toolbox.aclose()


async def test_every_failure_of_a_call_is_the_tools_result():
    toolbox = Toolbox(python_tools("broken", "slow", "lookup", timeout=0.2))
    await toolbox.start()
    cases = {
        "unknown tool": (await toolbox.call("nope", "{}"), "no tool named 'nope'"),
        "bad json": (await toolbox.call("lookup", "{term: x"), "not valid JSON"),
        "not an object": (await toolbox.call("lookup", "[1]"), "must be a JSON object"),
        "raises": (await toolbox.call("broken", '{"x": 4}'), "ValueError: cannot handle 4"),
        "missing argument": (await toolbox.call("lookup", "{}"), "TypeError"),
        "too slow": (await toolbox.call("slow", '{"seconds": 2}'), "ran past its 0.2s timeout"),
    }
    for what, (outcome, said) in cases.items():
        assert not outcome.ok, what
        assert said in outcome.text, (what, outcome.text)
    await toolbox.aclose()


async def test_a_function_that_does_not_import_fails_the_start_naming_the_field():
    spec = ToolsSpec(
        python=(
            PythonToolSpec("tests.no_such_module:f", where="tools.python[0]"),
            PythonToolSpec("tests.agent_tools:missing", where="tools.python[1]"),
        ),
        source="job.toml",
    )
    with pytest.raises(ToolSetupError) as caught:
        await Toolbox(spec).start()
    text = str(caught.value)
    assert "job.toml: tools.python[0].function: cannot use it: ModuleNotFoundError" in text
    assert "job.toml: tools.python[1].function: cannot use it: AttributeError" in text


def test_the_transcript_says_where_an_agent_stands():
    call = lambda i: {"id": f"c{i}", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}  # noqa: E731
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call(1)]},
        {"role": "tool", "tool_call_id": "c1", "content": "r1"},
        {"role": "assistant", "content": None, "tool_calls": [call(2), call(3)]},
        {"role": "tool", "tool_call_id": "c3", "content": "r3"},
    ]
    assert steps_taken(messages) == 2
    assert [c["id"] for c in pending_tool_calls(messages)] == ["c2"]
    assert pending_tool_calls(messages[:3]) == []


def test_tools_in_a_toml_job_are_checked_with_file_line_and_field(tmp_path):
    job = tmp_path / "agents.toml"
    job.write_text(
        'name = "a"\nmodel = "m"\n[tasks]\ncount = 2\nprompt = "t{agent}"\n'
        "[agents]\nmax_steps = 0\ntool_timeout = 5\n"
        '[[tools.mcp]]\nname = "demo"\ncommand = ["python", "-m", "x"]\n'
        '[[tools.mcp]]\nname = "demo"\nurl = "ftp://nope"\n'
        '[[tools.python]]\nfunction = "no_colon"\n'
    )
    with pytest.raises(InputError) as caught:
        load_job(job)
    text = str(caught.value)
    assert f"{job}:7: agents.max_steps: must be an integer from 1 to 100, not 0" in text
    assert f"{job}:14: tools.mcp[1].url: must be an http(s) URL, not 'ftp://nope'" in text
    assert f"{job}:16: tools.python[0].function: must be 'module:function', not 'no_colon'" in text


def test_a_tools_file_for_a_batch_job(tmp_path):
    tools = tmp_path / "tools.toml"
    tools.write_text('[agents]\nmax_steps = 4\n[[tools.python]]\nfunction = "tests.agent_tools:lookup"\n')
    spec = load_tools_file(tools)
    assert spec.max_steps == 4 and spec.python[0].function == "tests.agent_tools:lookup"
    empty = tmp_path / "empty.toml"
    empty.write_text("[agents]\nmax_steps = 4\n")
    with pytest.raises(InputError, match="declares no tools"):
        load_tools_file(empty)


async def test_an_mcp_server_that_dies_is_started_again_and_only_its_call_in_flight_fails():
    import sys

    from swarm_tui.tools.spec import McpServerSpec

    spec = ToolsSpec(
        mcp=(McpServerSpec("crashy", (sys.executable, "-m", "tests.mcp_crashy"), where="tools.mcp[0]"),),
        tool_timeout_s=10,
        source="job.toml",
    )
    toolbox = Toolbox(spec)
    await toolbox.start()
    try:
        first = await toolbox.call("echo", '{"text": "a"}')
        assert first.ok and first.text.startswith("echo(a) from ")
        died = await toolbox.call("crash", "{}")
        assert not died.ok and died.text.startswith("error: ")  # the call in flight, as the tool's result
        again = await toolbox.call("echo", '{"text": "b"}')
        assert again.ok and again.text.startswith("echo(b) from ")
        assert again.text.split()[-1] != first.text.split()[-1]  # a new server process
    finally:
        await toolbox.aclose()


async def test_an_mcp_command_that_does_not_start_fails_before_anything_is_sent():
    from swarm_tui.tools.spec import McpServerSpec

    spec = ToolsSpec(
        mcp=(McpServerSpec("nope", ("/nonexistent/mcp-server",), where="tools.mcp[0]"),), source="job.toml"
    )
    with pytest.raises(ToolSetupError) as caught:
        await Toolbox(spec).start()
    assert "job.toml: tools.mcp[0]: MCP server '/nonexistent/mcp-server' did not start" in str(caught.value)


def test_an_mcp_entrys_processes_are_checked_with_file_line_and_field(tmp_path):
    job = tmp_path / "agents.toml"
    job.write_text(
        'name = "a"\nmodel = "m"\n[tasks]\ncount = 2\nprompt = "t{agent}"\n'
        '[[tools.mcp]]\nname = "one"\ncommand = ["python", "-m", "x"]\nprocesses = 0\n'
        '[[tools.mcp]]\nname = "two"\nurl = "http://127.0.0.1:1/mcp"\nprocesses = 2\n'
        '[[tools.mcp]]\nname = "three"\ncommand = ["python", "-m", "x"]\nprocesses = true\n'
    )
    with pytest.raises(InputError) as caught:
        load_job(job)
    text = str(caught.value)
    assert f"{job}:9: tools.mcp[0].processes: must be an integer from 1 to 32, not 0" in text
    assert f"{job}:13: tools.mcp[1].processes: applies to a command (stdio); a url is one server" in text
    assert f"{job}:17: tools.mcp[2].processes: must be an integer from 1 to 32, not True" in text
    job.write_text(
        'name = "a"\nmodel = "m"\n[tasks]\ncount = 2\nprompt = "t{agent}"\n'
        '[[tools.mcp]]\nname = "one"\ncommand = ["python", "-m", "x"]\nprocesses = 3\n'
        '[[tools.mcp]]\nname = "two"\ncommand = ["python", "-m", "y"]\n'
    )
    loaded = load_job(job).tools
    assert loaded is not None and [m.processes for m in loaded.mcp] == [3, 2]  # 2 unless told
    assert ToolsSpec.from_meta(loaded.to_meta()) == loaded  # a resumed run starts as many


def alive(pid: int) -> bool:
    """The process exists and is not a zombie waiting to be reaped."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def test_a_pooled_mcp_server_keeps_each_caller_on_one_process_and_stops_them_all():
    import sys

    from swarm_tui.tools.spec import McpServerSpec

    spec = ToolsSpec(
        mcp=(McpServerSpec("crashy", (sys.executable, "-m", "tests.mcp_crashy"), where="tools.mcp[0]", processes=3),),
        tool_timeout_s=10,
        source="job.toml",
    )
    toolbox = Toolbox(spec)
    await toolbox.start()
    try:
        assert [t["function"]["name"] for t in toolbox.openai_tools()] == ["echo", "crash"]  # listed once

        async def pid_of(caller: int) -> int:
            outcome = await toolbox.call("echo", f'{{"text": "{caller}"}}', caller=caller)
            assert outcome.ok, outcome.text
            return int(outcome.text.split()[-1])

        pids = await asyncio.gather(*(pid_of(caller) for caller in range(9)))
        assert len(set(pids)) == 3  # three processes share the callers
        assert pids == [pids[caller % 3] for caller in range(9)]  # each caller always on the same one
        assert (await toolbox.call("crash", "{}", caller=1)).ok is False  # one member dies...
        assert await pid_of(0) == pids[0] and await pid_of(2) == pids[2]  # ...the others go on
        assert await pid_of(4) not in pids  # and it is started again at its next call
    finally:
        await toolbox.aclose()
    assert not any(alive(pid) for pid in pids)
