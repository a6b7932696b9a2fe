"""What an admitted request is answered: a tool step, a judge's verdict, or the final answer.

The answer stage of ``Simulator.chat``, past every refusal and fault: pure functions of the
request, the config and its draws. While an agent has tool rounds left it takes a tool step
(``tools.py``); else a judge request gets a verdict (``judging.py``); else the text or JSON answer
(``answers.py``), quoting any tool results and carrying its quality mark. With reasoning on
(``[[sim:reasoning]]`` or ``SimConfig.reasoning``) any of them gets a ``reasoning_content``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from swarm_tui.sim.answer_faults import REFUSAL_TEXT, answer_fault, broken_instance, schema_instance, schema_of
from swarm_tui.sim.answers import build_answer, build_json_answer, planned_subtasks, wants_json
from swarm_tui.sim.config import SimConfig
from swarm_tui.sim.draws import Draws
from swarm_tui.sim.faults import Faults
from swarm_tui.sim.judging import JudgeRequest, answer_quality, drift_line, judge_content, memory_rounds, quality_mark
from swarm_tui.sim.orchestrating import SWARM_TOOLS, Orchestration
from swarm_tui.sim.request import Call, ChatRequest
from swarm_tui.sim.tokens import estimate_tokens
from swarm_tui.sim.tools import (
    choose_calls,
    directives,
    first_user_text,
    fit_tool_answer,
    folded_results,
    planned_rounds,
    quote_results,
    reasoning_text,
    rounds_done,
    scripted_tokens,
    thought,
    tool_results,
)

__all__ = ["Answer", "Turn", "agent_turn", "judge_answer", "tool_step", "final_answer", "add_reasoning"]


@dataclass(slots=True)
class Answer:
    """The assistant message of a reply, and what the counters learn from it."""

    content: str | None
    #: completion tokens of the content and the calls (reasoning apart)
    tokens: int
    finish_reason: str
    #: the calls in OpenAI's form (``id``, ``type``, ``function``)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    #: a tool-calling step (even one whose every call ``max_tokens`` cut away)
    tool_step: bool = False
    reasoning: str | None = None
    reasoning_tokens: int = 0
    #: the quality (1-10) a task answer carries (None: not a task answer)
    quality: int | None = None
    #: a judge's verdict written as prose (``judge_prose_first``)
    judge_prose: bool = False
    #: the model's refusal (``message.refusal``; the content is then None)
    refusal: str | None = None


@dataclass(slots=True, frozen=True)
class Turn:
    """Where an agent is in its loop: its task, its step, what its tools said, what it does now."""

    #: the first user message ('' unless tools are offered or reasoning is on)
    task: str
    #: tool rounds already taken
    step: int
    results: list[str]
    reasoning: bool
    #: the ``(name, arguments)`` of the calls this step makes (None: it answers now)
    calls: list[tuple[str, str]] | None


def agent_turn(config: SimConfig, request: ChatRequest) -> Turn:
    """The turn a request is: a tool step while the agent has tool rounds left (or must call)."""
    messages = request.messages
    scripted_rounds, reasoning_marked = directives(messages)
    reasoning_on = config.reasoning or reasoning_marked
    tools = request.tools
    agent = tools is not None or reasoning_on
    task = first_user_text(messages) if agent else ""
    step = rounds_done(messages) if agent else 0
    calls: list[tuple[str, str]] | None = None
    offered = [t for t in tools.tools if t.name not in SWARM_TOOLS] if tools is not None else []
    if tools is not None and tools.calls_allowed and offered:  # the swarm tools are an orchestrator's alone
        if tools.must_call:
            want = True
        else:
            rounds = scripted_rounds
            if rounds is None:
                rounds = planned_rounds(config.seed, task, *config.tool_rounds)
            want = step < rounds
        if want:
            calls = choose_calls(config.seed, task, step, offered, parallel=tools.parallel, forced=tools.forced)
    return Turn(task, step, tool_results(messages), reasoning_on, calls)


def orchestrator_answer(
    orchestration: Orchestration, turn: Turn, config: SimConfig, call: Call, id_prefix: str
) -> Answer:
    """An orchestrator's turn (``orchestrating.py``): its spawn or wait call as a tool step, or its
    final answer quoting its sub-agents, cut at ``max_tokens``."""
    if orchestration.calls is not None:
        step = Turn(turn.task, turn.step, turn.results, turn.reasoning, orchestration.calls)
        return tool_step(config, step, call.request.max_tokens, id_prefix)
    content, tokens, finish = _cut(orchestration.content or "", call.request.max_tokens)
    return Answer(content, tokens, finish)


def judge_answer(judged: JudgeRequest, config: SimConfig, call: Call, prose: bool) -> Answer:
    """A judge's verdict on what it was shown (JSON, or prose when ``prose``)."""
    content, _ = judge_content(judged, config.seed, call.key, call.occurrence, prose)
    content, tokens, finish = _cut(content, call.request.max_tokens)
    return Answer(content, tokens, finish, judge_prose=prose)


def tool_step(config: SimConfig, turn: Turn, max_tokens: int | None, id_prefix: str) -> Answer:
    """A tool-calling step: a thought (or none) and the turn's calls, cut at ``max_tokens``;
    call ids are ``id_prefix`` and the call's number."""
    assert turn.calls is not None
    content = thought(config.seed, turn.task, turn.step, [name for name, _ in turn.calls])
    content, calls, tokens, finish = fit_tool_answer(content, turn.calls, max_tokens)
    tool_calls = [
        {"id": f"{id_prefix}{i:02x}", "type": "function", "function": {"name": name, "arguments": arguments}}
        for i, (name, arguments) in enumerate(calls)
    ]
    return Answer(content, tokens, finish, tool_calls, tool_step=True)


def final_answer(config: SimConfig, call: Call, draws: Draws, results: list[str], faults: Faults) -> Answer:
    """The task's answer: a plan for a planner, else text or JSON (JSON when asked for, unless a
    ``prose`` marker says otherwise), quoting the tool results, with its quality mark."""
    request = call.request
    messages = request.messages
    lo, hi = config.output_tokens
    length = scripted_tokens(messages)
    if length is not None:
        lo = hi = length
    plan_size = planned_subtasks(call.prompt)
    note: str | None = None
    tail = ""
    quality: int | None = None
    if not plan_size:
        rounds = memory_rounds(messages)
        quality = answer_quality(config.seed, call.key, call.occurrence, rounds, config.drift_after_rounds)
        tail = quality_mark(quality)
        if config.drift_after_rounds is not None:
            note = drift_line(messages, rounds, config.drift_after_rounds)
    unusable = None if plan_size else answer_fault(config, request.body, messages, draws)
    if unusable == "refusal":
        return Answer(None, estimate_tokens(REFUSAL_TEXT), "stop", refusal=REFUSAL_TEXT)
    schema = schema_of(request.body)
    if not faults.prose and not plan_size and not faults.broken_json and schema is not None:
        value = schema_instance(schema, draws.u_filler, call.prompt)
        if unusable in ("wrong_enum", "missing_field", "prose"):
            content = broken_instance(value, schema, unusable)
        else:
            content = json.dumps(value, ensure_ascii=False)
        content, tokens, finish = _cut(content, request.max_tokens)
    elif not faults.prose and (plan_size or faults.broken_json or wants_json(request.body)):
        content = build_json_answer(
            call.prompt,
            draws.u_filler,
            plan_size,
            faults.broken_json,
            folded_results(results) if results else None,
            note,
            tail,
        )
        content, tokens, finish = _cut(content, request.max_tokens)
    else:
        extra = "\n".join(x for x in (quote_results(results) if results else None, note) if x)
        content, tokens, finish = build_answer(
            call.prompt, draws.answer_tokens(lo, hi), draws.u_filler, request.max_tokens, extra or None, tail
        )
    if unusable == "length":  # cut short, as if its max_tokens ran out halfway
        content = content[: max(1, len(content) // 2)]
        tokens, finish = estimate_tokens(content), "length"
    elif unusable == "content_filter":
        content = content[: max(1, len(content) // 3)]
        tokens, finish = estimate_tokens(content), "content_filter"
    return Answer(content, tokens, finish, quality=quality)


def add_reasoning(answer: Answer, turn: Turn) -> None:
    """The ``reasoning_content`` of the turn: what the step is about to do, and why."""
    names = [c["function"]["name"] for c in answer.tool_calls] or None
    answer.reasoning = reasoning_text(turn.task, turn.step, names, len(turn.results))
    answer.reasoning_tokens = estimate_tokens(answer.reasoning)


def _cut(content: str, max_tokens: int | None) -> tuple[str, int, str]:
    """``(content, tokens, finish_reason)``: cut at ``max_tokens`` ("length") when it is longer."""
    tokens = estimate_tokens(content)
    if max_tokens is not None and tokens > max_tokens:
        content = content.encode("utf-8")[: max_tokens * 4].decode("utf-8", "ignore")
        return content, estimate_tokens(content), "length"
    return content, tokens, "stop"
