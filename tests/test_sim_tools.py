"""The simulator as a tool-calling model, over real HTTP on loopback.

An agent loop here is the test's own: it sends the conversation, runs each requested call
with a local fake tool that echoes the call, appends the assistant message and one tool
message per call, and asks again until an answer without tool calls.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random

import httpx
import jsonschema
import openai
import pytest
from swarm_tui.sim import SimConfig, SimServer
from swarm_tui.sim.faults import find_marker, marker_message
from swarm_tui.sim.tokens import estimate_tokens, prompt_tokens
from swarm_tui.sim.tool_arguments import schema_arguments
from swarm_tui.sim.tool_request import check_tool_messages, parse_tools
from swarm_tui.sim.tools import choose_calls, directives, fit_tool_answer, quote_results, split_arguments, task_token

LOOKUP = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Look a term up.",
        "parameters": {"type": "object", "properties": {"term": {"type": "string"}}, "required": ["term"]},
    },
}
ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
    },
}
SEARCH = {  # enums, bounds, nested objects, arrays, $ref and optional properties
    "type": "function",
    "function": {
        "name": "search_docs",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 3},
                "mode": {"type": "string", "enum": ["fast", "deep"]},
                "limit": {"type": "integer", "minimum": 2, "maximum": 5},
                "filters": {"$ref": "#/$defs/Filters"},
                "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                "since": {"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}]},
                "verbose": {"type": "boolean"},
                "unused": {"type": "string"},
            },
            "required": ["query", "mode", "limit", "filters", "tags", "since", "verbose"],
            "$defs": {
                "Filters": {
                    "type": "object",
                    "properties": {"lang": {"type": "string", "const": "en"}, "score": {"type": "number"}},
                    "required": ["lang", "score"],
                }
            },
        },
    },
}
TOOLS = [LOOKUP, ADD, SEARCH]
SCHEMAS = {t["function"]["name"]: t["function"].get("parameters", {}) for t in TOOLS}


@pytest.fixture
def make_sim():
    servers: list[SimServer] = []

    def make(**fields) -> SimServer:
        fields.setdefault("latency_ms", 0.0)
        server = SimServer(SimConfig(**fields)).start()
        servers.append(server)
        return server

    yield make
    for s in servers:
        s.stop()


def token_of(task: str) -> str:
    return "t-" + hashlib.sha256(task.encode("utf-8")).hexdigest()[:8]


def run_tool(call: dict) -> str:
    """The fake tool: echoes its call, so a quoted result names the call (and its token)."""
    fn = call["function"]
    return f"{fn['name']}({fn['arguments']}) -> ok {call['id'][-6:]}"


def post(sim: SimServer, payload: dict, client: httpx.Client | None = None) -> httpx.Response:
    if client is not None:
        return client.post(sim.base_url + "/chat/completions", json=payload)
    with httpx.Client(trust_env=False, timeout=10) as c:
        return c.post(sim.base_url + "/chat/completions", json=payload)


def agent(sim: SimServer, task: str, tools=TOOLS, max_steps: int = 12, **extra) -> tuple[list[dict], list[dict]]:
    """Run one agent to its final answer; returns (its answers' choices, the conversation)."""
    messages: list[dict] = [
        {"role": "system", "content": "You are a careful agent."},
        {"role": "user", "content": task},
    ]
    choices = []
    with httpx.Client(trust_env=False, timeout=10) as c:
        for _ in range(max_steps):
            r = post(sim, {"model": "m", "messages": messages, "tools": tools, **extra}, c)
            assert r.status_code == 200, r.text
            choice = r.json()["choices"][0]
            choices.append(choice)
            msg = choice["message"]
            messages.append(
                {"role": "assistant", "content": msg["content"], "tool_calls": msg.get("tool_calls")}
                if msg.get("tool_calls")
                else {"role": "assistant", "content": msg["content"]}
            )
            if not msg.get("tool_calls"):
                return choices, messages
            for call in msg["tool_calls"]:
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": run_tool(call)})
    raise AssertionError("the agent never answered")


def results_of(messages: list[dict]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "tool"]


def check_call(call: dict, task: str) -> None:
    assert call["type"] == "function" and call["id"].startswith("call_")
    fn = call["function"]
    args = json.loads(fn["arguments"])
    jsonschema.validate(args, SCHEMAS[fn["name"]])
    strings = [v for v in args.values() if isinstance(v, str)]
    if fn["name"] != "add":
        assert any(token_of(task) in s for s in strings), args


# -- pure rules -------------------------------------------------------------------------------


def test_arguments_follow_the_schema():
    token = task_token("some task")
    assert token == token_of("some task")
    for seed in range(40):
        rng = random.Random(seed)
        args = schema_arguments(SEARCH["function"]["parameters"], rng, token)
        jsonschema.validate(args, SEARCH["function"]["parameters"])
        assert "unused" not in args  # only the required properties
        assert args["query"].startswith(token + " ")  # a query: the token and a topic
        assert args["filters"]["lang"] == "en" and 2 <= args["limit"] <= 5
        assert args["tags"] == [token]
        assert schema_arguments(ADD["function"]["parameters"], rng, token).keys() == {"a", "b"}
    assert schema_arguments({}, random.Random(0), token) == {}
    assert schema_arguments(
        {"type": "object", "properties": {"x": {"type": "integer", "maximum": -3}}, "required": ["x"]},
        random.Random(0),
        token,
    ) == {"x": -3}


def test_choices_are_seeded_by_the_task():
    tools = parse_tools({"tools": TOOLS})
    assert not isinstance(tools, tuple) and tools is not None
    a = [choose_calls(0, "task A", step, tools.tools) for step in range(5)]
    assert a == [choose_calls(0, "task A", step, tools.tools) for step in range(5)]
    assert a != [choose_calls(0, "task B", step, tools.tools) for step in range(5)]
    sizes = {len(choose_calls(0, f"task {i}", 0, tools.tools)) for i in range(60)}
    assert sizes == {1, 2, 3}
    assert {len(choose_calls(0, f"task {i}", 0, tools.tools, parallel=False)) for i in range(30)} == {1}
    forced = {n for i in range(20) for n, _ in choose_calls(0, f"task {i}", 0, tools.tools, forced="add")}
    assert forced == {"add"}


def test_markers_quotes_and_cuts():
    msgs = [{"role": "user", "content": "[[sim:tools=3]] task"}, {"role": "user", "content": "x [[sim:500x1]]"}]
    assert directives(msgs) == (3, False)
    assert directives([{"role": "user", "content": "[[sim:reasoning]] [[sim:tools=0]]"}]) == (0, True)
    assert directives([{"role": "system", "content": "[[sim:tools=2]]"}]) == (None, False)
    # a directive does not hide a fault marker in a later message; it is not a fault itself
    assert find_marker(marker_message(msgs)).code == "500"
    assert find_marker("[[sim:tools=2]]") is None and find_marker("[[sim:reasoning]]") is None
    assert quote_results(["a\nb", "x" * 100]) == "tool results: a b | " + "x" * 80 + "…"
    args = '{"term":"t-12345678 rate limits"}'
    assert "".join(split_arguments(args)) == args
    content, calls, n, finish = fit_tool_answer("thinking", [("lookup", args), ("add", '{"a":1,"b":2}')], 5)
    assert finish == "length" and n <= 5 and len(calls) == 1 and calls[0][0] == "lookup"
    assert content == "thinking" and len(calls[0][1]) < len(args)
    assert fit_tool_answer(None, [("add", '{"a":1}')], None) == (None, [("add", '{"a":1}')], 3, "tool_calls")


def test_tool_messages_must_answer_the_calls():
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    user = {"role": "user", "content": "t"}
    asks = {"role": "assistant", "content": None, "tool_calls": [call]}
    assert check_tool_messages([user, asks, {"role": "tool", "tool_call_id": "c1", "content": "r"}]) is None
    assert (
        "preceeding message with 'tool_calls'"
        in check_tool_messages([user, {"role": "tool", "tool_call_id": "c1", "content": "r"}])[0]
    )
    assert "did not have response messages: c1" in check_tool_messages([user, asks])[0]
    assert "did not have response messages: c1" in check_tool_messages([user, asks, user])[0]
    assert "not found" in check_tool_messages([user, asks, {"role": "tool", "tool_call_id": "c9", "content": "r"}])[0]
    assert "tool_call_id" in check_tool_messages([user, asks, {"role": "tool", "content": "r"}])[1]


# -- over HTTP ----------------------------------------------------------------------------------


@pytest.mark.parametrize("rounds", [0, 1, 3])
def test_scripted_rounds_then_a_final_answer_quoting_the_results(make_sim, rounds):
    sim = make_sim()
    task = f"Study the retry policy [[sim:tools={rounds}]]"
    choices, messages = agent(sim, task)
    assert len(choices) == rounds + 1
    for choice in choices[:-1]:
        assert choice["finish_reason"] == "tool_calls"
        msg = choice["message"]
        assert msg["content"] is None or token_of(task) in msg["content"]
        assert 1 <= len(msg["tool_calls"]) <= 3
        for call in msg["tool_calls"]:
            check_call(call, task)
    final = choices[-1]
    assert final["finish_reason"] == "stop" and "tool_calls" not in final["message"]
    content = final["message"]["content"]
    assert content.startswith("Sim answer to: " + task)
    results = results_of(messages)
    if rounds:
        assert quote_results(results) in content.splitlines()
        assert all(token_of(task) in r or r.startswith("add(") for r in results)
    else:
        assert "tool results:" not in content
    ids = [c["id"] for ch in choices for c in ch["message"].get("tool_calls") or []]
    assert len(ids) == len(set(ids)) == len(results)
    stats = sim.stats()
    assert stats["tool_steps"] == rounds and stats["tool_calls"] == len(ids)


async def test_many_agents_each_quote_their_own_results(make_sim):
    sim = make_sim(latency_ms=5.0, tool_rounds=(1, 4))
    tasks = [f"agent {i}: compare failover strategies" for i in range(12)]
    runs = await asyncio.gather(*(asyncio.to_thread(agent, sim, t) for t in tasks))
    all_ids: list[str] = []
    steps = set()
    for task, (choices, messages) in zip(tasks, runs, strict=True):
        steps.add(len(choices) - 1)
        assert 1 <= len(choices) - 1 <= 4  # the default: a seeded 1-4 tool rounds
        final = choices[-1]["message"]["content"]
        assert quote_results(results_of(messages)) in final.splitlines()
        others = [token_of(t) for t in tasks if t != task]
        assert not any(tok in final for tok in others)
        all_ids += [c["id"] for ch in choices for c in ch["message"].get("tool_calls") or []]
    assert len(all_ids) == len(set(all_ids))  # unique across agents too
    assert len(steps) > 1
    # the same task makes the same choices (ids aside) on a fresh simulator
    again = make_sim(latency_ms=5.0, tool_rounds=(1, 4))
    first, _ = runs[0]
    second, _ = agent(again, tasks[0])
    strip = [
        [(c["function"]["name"], c["function"]["arguments"]) for c in ch["message"].get("tool_calls") or []]
        for ch in first
    ]
    assert strip == [
        [(c["function"]["name"], c["function"]["arguments"]) for c in ch["message"].get("tool_calls") or []]
        for ch in second
    ]


def test_tool_choice_and_config(make_sim):
    sim = make_sim(tool_rounds=(2, 2))
    choices, _ = agent(sim, "fixed rounds")
    assert len(choices) == 3
    choices, _ = agent(sim, "never [[sim:tools=3]]", tool_choice="none")
    assert len(choices) == 1 and choices[0]["finish_reason"] == "stop"
    choices, _ = agent(sim, "one at a time [[sim:tools=4]]", parallel_tool_calls=False)
    assert [len(c["message"].get("tool_calls") or []) for c in choices] == [1, 1, 1, 1, 0]
    # forced: a call on every answer, as a real model does, of the named tool only
    with pytest.raises(AssertionError, match="never answered"):
        agent(sim, "forced [[sim:tools=1]]", max_steps=4, tool_choice={"type": "function", "function": {"name": "add"}})
    r = post(
        sim,
        {
            "model": "m",
            "messages": [{"role": "user", "content": "req [[sim:tools=0]]"}],
            "tools": TOOLS,
            "tool_choice": "required",
        },
    )
    assert r.json()["choices"][0]["finish_reason"] == "tool_calls"
    r = post(
        sim,
        {
            "model": "m",
            "messages": [{"role": "user", "content": "forced"}],
            "tools": TOOLS,
            "tool_choice": {"type": "function", "function": {"name": "add"}},
        },
    )
    assert {c["function"]["name"] for c in r.json()["choices"][0]["message"]["tool_calls"]} == {"add"}
    # no tools offered: a marker does nothing
    r = post(sim, {"model": "m", "messages": [{"role": "user", "content": "plain [[sim:tools=3]]"}]})
    assert r.json()["choices"][0]["finish_reason"] == "stop"


def test_usage_counts_tools_and_tool_messages(make_sim):
    sim = make_sim()
    choices, messages = agent(sim, "count me [[sim:tools=2]]", max_tokens=500)
    with httpx.Client(trust_env=False, timeout=10) as c:
        body = {"model": "m", "messages": messages[:-1], "tools": TOOLS}
        r = post(sim, body, c).json()
    tools_tokens = estimate_tokens(json.dumps(TOOLS, separators=(",", ":"), ensure_ascii=False))
    assert r["usage"]["prompt_tokens"] == prompt_tokens(messages[:-1]) + tools_tokens
    step = choices[0]
    calls = step["message"]["tool_calls"]
    text = (step["message"]["content"] or "") + "".join(
        c["function"]["name"] + c["function"]["arguments"] for c in calls
    )
    # completion tokens of a tool step: its text and calls, estimated together
    assert post(sim, {"model": "m", "messages": messages[:2], "tools": TOOLS}).json()["usage"][
        "completion_tokens"
    ] == estimate_tokens(text)


def test_json_answer_carries_the_results(make_sim):
    sim = make_sim()
    choices, messages = agent(sim, "json please [[sim:tools=1]]", response_format={"type": "json_object"})
    answer = json.loads(choices[-1]["message"]["content"])
    assert answer["tool_results"] == [r[:80] + ("…" if len(r) > 80 else "") for r in results_of(messages)]


def test_max_tokens_cuts_a_tool_step(make_sim):
    sim = make_sim()
    cut = 0
    for i in range(10):
        r = post(
            sim,
            {
                "model": "m",
                "messages": [{"role": "user", "content": f"tiny {i} [[sim:tools=1]]"}],
                "tools": [SEARCH],
                "max_tokens": 16,
            },
        ).json()
        choice = r["choices"][0]
        assert choice["finish_reason"] == "length" and r["usage"]["completion_tokens"] <= 16
        for call in choice["message"].get("tool_calls") or []:
            with pytest.raises(ValueError):  # cut short, as a real model's is
                json.loads(call["function"]["arguments"])
            cut += 1
    assert cut


def test_faults_and_limits_apply_to_tool_steps(make_sim):
    sim = make_sim(hang_s=0.2)
    payload = {
        "model": "m",
        "messages": [{"role": "user", "content": "flaky [[sim:tools=1]] [[sim:500x1]]"}],
        "tools": TOOLS,
    }
    assert post(sim, payload).status_code == 500
    assert post(sim, payload).json()["choices"][0]["finish_reason"] == "tool_calls"
    payload["messages"][0]["content"] = "slow [[sim:tools=1]] [[sim:hangx1]]"
    assert post(sim, payload).status_code == 504
    assert post(sim, payload).json()["choices"][0]["finish_reason"] == "tool_calls"
    limited = make_sim(rpm=60)  # a bucket of one request
    payload["messages"][0]["content"] = "limited [[sim:tools=2]]"
    assert post(limited, payload).status_code == 200
    r = post(limited, payload)
    assert r.status_code == 429 and r.headers["retry-after"] and r.json()["error"]["code"] == "rate_limit_exceeded"


def test_invalid_tools_and_tool_messages_are_400(make_sim):
    sim = make_sim()
    user = [{"role": "user", "content": "bad"}]
    cases = [
        ({"tools": {}}, "tools", "invalid_type"),
        ({"tools": []}, "tools", "empty_array"),
        ({"tools": [{"type": "code_interpreter"}]}, "tools[0].type", "invalid_value"),
        ({"tools": [{"type": "function"}]}, "tools[0].function", "missing_required_parameter"),
        (
            {"tools": [{"type": "function", "function": {"name": "bad name"}}]},
            "tools[0].function.name",
            "invalid_value",
        ),
        (
            {"tools": [LOOKUP], "tool_choice": {"type": "function", "function": {"name": "nope"}}},
            "tool_choice",
            "invalid_value",
        ),
        ({"tools": [LOOKUP], "tool_choice": "always"}, "tool_choice", "invalid_value"),
    ]
    for extra, param, code in cases:
        r = post(sim, {"model": "m", "messages": user, **extra})
        err = r.json()["error"]
        assert r.status_code == 400 and (err["param"], err["code"]) == (param, code), (extra, err)
    orphan = [*user, {"role": "tool", "tool_call_id": "call_1", "content": "r"}]
    r = post(sim, {"model": "m", "messages": orphan, "tools": [LOOKUP]})
    assert r.status_code == 400 and "must be a response to a preceeding message" in r.json()["error"]["message"]
    assert sim.stats()["successes"] == 0
    # tools: null is no tools
    assert post(sim, {"model": "m", "messages": user, "tools": None}).status_code == 200


def _reassemble(chunks) -> tuple[str | None, str, list[dict], str | None]:
    content: str | None = None
    reasoning = ""
    calls: dict[int, dict] = {}
    finish = None
    for chunk in chunks:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        if delta.content:
            content = (content or "") + delta.content
        extra = delta.model_extra or {}
        reasoning += extra.get("reasoning_content") or ""
        for tc in delta.tool_calls or []:
            if tc.index not in calls:  # a call's first chunk: id, type, name, empty arguments
                assert tc.id and tc.type == "function" and tc.function.name and tc.function.arguments == ""
                calls[tc.index] = {
                    "id": tc.id,
                    "type": "function",
                    "function": {"name": tc.function.name, "arguments": ""},
                }
            else:
                assert tc.id is None and tc.function.name is None
                calls[tc.index]["function"]["arguments"] += tc.function.arguments
        finish = chunk.choices[0].finish_reason or finish
    return content, reasoning, [calls[i] for i in sorted(calls)], finish


async def test_streamed_tool_calls_reassemble(make_sim):
    sim = make_sim(chunk_delay_ms=0.5)
    client = openai.AsyncOpenAI(base_url=sim.base_url, api_key="sk-test", max_retries=0)
    messages = [{"role": "user", "content": "streamed agent [[sim:tools=2]]"}]
    plain = await client.chat.completions.create(model="m", messages=messages, tools=TOOLS)
    sim.reset()
    stream = await client.chat.completions.create(
        model="m", messages=messages, tools=TOOLS, stream=True, stream_options={"include_usage": True}
    )
    chunks = [c async for c in stream]
    content, reasoning, calls, finish = _reassemble(chunks)
    assert finish == "tool_calls" and reasoning == ""
    want = plain.choices[0].message
    assert content == want.content
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in calls] == [
        (c.function.name, c.function.arguments) for c in want.tool_calls
    ]
    assert len({c["id"] for c in calls}) == len(calls)
    assert chunks[-1].usage.completion_tokens == plain.usage.completion_tokens
    # the SDK's own accumulation agrees
    async with client.chat.completions.stream(model="m", messages=messages, tools=TOOLS) as s:
        final = await s.get_final_completion()
    assert [c.function.arguments for c in final.choices[0].message.tool_calls] == [
        c.function.arguments for c in want.tool_calls
    ]
    await client.close()


async def test_reasoning_deltas_with_the_marker_or_the_flag(make_sim):
    sim = make_sim()
    client = openai.AsyncOpenAI(base_url=sim.base_url, api_key="sk-test", max_retries=0)
    messages = [{"role": "user", "content": "think first [[sim:reasoning]] [[sim:tools=1]]"}]
    for tools in (TOOLS, None):
        extra = {"tools": tools} if tools else {}
        stream = await client.chat.completions.create(
            model="m", messages=messages, stream=True, stream_options={"include_usage": True}, **extra
        )
        chunks = [c async for c in stream]
        content, reasoning, calls, finish = _reassemble(chunks)
        assert reasoning.startswith("Step 1 of task " + token_of(messages[0]["content"]))
        first_reasoning = next(
            i
            for i, c in enumerate(chunks)
            if c.choices and (c.choices[0].delta.model_extra or {}).get("reasoning_content")
        )
        later = [
            i
            for i, c in enumerate(chunks)
            if c.choices and (c.choices[0].delta.content or c.choices[0].delta.tool_calls)
        ]
        assert later and first_reasoning < min(later)  # reasoning comes before the content
        usage = chunks[-1].usage
        assert usage.completion_tokens_details.reasoning_tokens == estimate_tokens(reasoning)
        assert bool(calls) == bool(tools) and finish == ("tool_calls" if tools else "stop")
    plain = await client.chat.completions.create(model="m", messages=messages)
    assert plain.choices[0].message.model_extra["reasoning_content"].startswith("Step 1")
    assert (
        plain.usage.completion_tokens
        == estimate_tokens(plain.choices[0].message.content) + plain.usage.completion_tokens_details.reasoning_tokens
    )
    # without the marker: none, unless the simulator is configured to reason
    quiet = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}])
    assert "reasoning_content" not in (quiet.choices[0].message.model_extra or {})
    await client.close()
    thinker = make_sim(reasoning=True)
    r = post(thinker, {"model": "m", "messages": [{"role": "user", "content": "q"}]}).json()
    assert r["choices"][0]["message"]["reasoning_content"].startswith("Step 1")


def test_requests_without_tools_are_unchanged(make_sim):
    sim = make_sim()
    r = post(sim, {"model": "m", "messages": [{"role": "user", "content": "plain task"}]}).json()
    msg = r["choices"][0]["message"]
    assert msg.keys() == {"role", "content", "refusal", "annotations"}
    assert msg["content"].startswith("Sim answer to: plain task ") and "\n" not in msg["content"]
    assert r["usage"]["completion_tokens"] == estimate_tokens(msg["content"])
    assert r["usage"]["completion_tokens_details"]["reasoning_tokens"] == 0
    with httpx.Client(trust_env=False, timeout=10) as c:
        text = c.post(
            sim.base_url + "/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "plain task"}], "stream": True},
        ).text
    assert "reasoning_content" not in text and "tool_calls" not in text
    assert '"delta":{"role":"assistant","content":"","refusal":null}' in text
    stats = sim.stats()
    assert stats["tool_steps"] == 0 and stats["tool_calls"] == 0


def test_cli_flags_for_agents():
    import argparse

    from swarm_tui.sim import add_arguments, config_from_args
    from swarm_tui.sim.args import config_to_argv

    cfg = SimConfig(tool_rounds=(0, 6), reasoning=True)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert config_from_args(parser.parse_args(config_to_argv(cfg))) == cfg
    assert SimConfig().patched(cfg.to_dict() | {"require_key": None}) == cfg  # a stored config comes back
    with pytest.raises(SystemExit):
        parser.parse_args(["--tool-rounds", "3:1"])
    with pytest.raises(ValueError, match="tool_rounds"):
        SimConfig(tool_rounds=(-1, 2))
