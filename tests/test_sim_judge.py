"""The simulator as a judge, and its answers' quality under context pollution.

A real simulator on loopback, driven with the official openai SDK (and httpx for the admin
routes): worker requests carry the swarm's rolling memory rendered by the real
``RollingMemory``, their answers carry a ``⟨qN⟩`` quality mark, and judge requests (system
message "You are an impartial judge ...", TASK/ANSWER sections) score what they are shown.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics

import httpx
import openai
import pytest
from swarm_tui.sim import SimConfig, add_arguments, config_from_args
from swarm_tui.sim.answers import build_answer
from swarm_tui.sim.args import config_to_argv
from swarm_tui.sim.judging import MEMORY_HEADER, QUALITY_MARK, judge_request, memory_rounds, quality_of
from swarm_tui.sim.tokens import estimate_tokens
from swarm_tui.swarm import memory as swarm_memory
from swarm_tui.swarm.memory import RollingMemory

JUDGE_SYSTEM = "You are an impartial judge. Score the ANSWER to the TASK against the rubric. Reply with JSON."
PAIR_SYSTEM = "You are an impartial judge. Compare ANSWER A and ANSWER B to the TASK. Reply with JSON."
TASKS = [f"Summarise the risks of plan {i}" for i in range(8)]


def memory_message(rounds: int) -> str:
    memory = RollingMemory(window=10)
    for r in range(1, rounds + 1):
        memory.add(r, f"Sim answer to: round {r} aggregate of the workers ⟨q9⟩ findings about caching {r}")
    return memory.render(10_000)


def worker_messages(task: str, rounds: int) -> list[dict]:
    messages = [{"role": "system", "content": "You are one worker of a swarm."}]
    if rounds:
        messages.append({"role": "system", "content": memory_message(rounds)})
    messages.append({"role": "user", "content": task})
    return messages


def judge_messages(task: str, answer: str) -> list[dict]:
    return [
        {"role": "system", "content": JUDGE_SYSTEM},
        {"role": "user", "content": f"TASK:\n{task}\n\nANSWER:\n{answer}"},
    ]


def pair_messages(task: str, a: str, b: str) -> list[dict]:
    return [
        {"role": "system", "content": PAIR_SYSTEM},
        {"role": "user", "content": f"TASK:\n{task}\n\nANSWER A:\n{a}\n\nANSWER B:\n{b}"},
    ]


def client(sim) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=sim.base_url, api_key="sk-test", max_retries=0)


async def ask(c: openai.AsyncOpenAI, messages: list[dict], **kw) -> str:
    r = await c.chat.completions.create(model="sim-1", messages=messages, **kw)
    return r.choices[0].message.content or ""


async def answer_and_score(c: openai.AsyncOpenAI, task: str, rounds: int) -> tuple[str, int]:
    answer = await ask(c, worker_messages(task, rounds))
    verdict = json.loads(await ask(c, judge_messages(task, answer), max_tokens=200))
    assert set(verdict) == {"score", "reason"} and isinstance(verdict["reason"], str) and "\n" not in verdict["reason"]
    assert isinstance(verdict["score"], int) and 1 <= verdict["score"] <= 10
    return answer, verdict["score"]


# -- the loop: fresh, polluted, flushed --------------------------------------------------------


async def test_judge_score_follows_the_drift_and_recovers_after_a_flush(sim_factory):
    sim = sim_factory(drift_after_rounds=2, seed=11)
    c = client(sim)
    by_rounds: dict[int, list[tuple[str, int]]] = {}
    for rounds in (0, 1, 2, 3, 4, 5):
        by_rounds[rounds] = list(await asyncio.gather(*(answer_and_score(c, t, rounds) for t in TASKS)))

    def qualities(rounds):
        return [quality_of(a) for a, _ in by_rounds[rounds]]

    def scores(rounds):
        return [s for _, s in by_rounds[rounds]]

    # up to N remembered rounds (and with none): full quality, 9 +-1, and the judge says so
    for rounds in (0, 1, 2):
        assert all(q is not None and 8 <= q <= 10 for q in qualities(rounds)), qualities(rounds)
        assert all(s >= 7 for s in scores(rounds)) and statistics.mean(scores(rounds)) >= 8
        assert not any("(drifting)" in a for a, _ in by_rounds[rounds])
    # past N: about 2 points a round, down to the floor; the judge follows within +-1
    means = [statistics.mean(qualities(r)) for r in (2, 3, 4, 5)]
    assert means == sorted(means, reverse=True) and means[0] - means[-1] >= 5, means
    for rounds in (3, 4, 5):
        for (answer, score), q in zip(by_rounds[rounds], qualities(rounds), strict=True):
            assert q is not None and abs(score - q) <= 1
            # a human sees it: the answer repeats the earlier rounds and says it is confused
            assert "(drifting)" in answer and 'as I said in round 1, "round 1 aggregate' in answer
            assert "confused" in answer or "not sure which task" in answer
    assert statistics.mean(scores(5)) <= 4
    # the answer itself still names its task, and ends with exactly one mark of its own
    for answer, _ in by_rounds[5]:
        assert answer.startswith("Sim answer to: Summarise the risks") and len(QUALITY_MARK.findall(answer)) == 1
        assert QUALITY_MARK.search(answer[-6:])
    # after a flush (no memory message) the next answers are fresh again
    flushed = await asyncio.gather(*(answer_and_score(c, t + " again", 0) for t in TASKS))
    assert statistics.mean(s for _, s in flushed) >= 8
    await c.close()


async def test_without_drift_answers_carry_quality_8_or_9_and_json_answers_carry_it_too(sim_factory):
    sim = sim_factory(seed=3)
    c = client(sim)
    results = await asyncio.gather(*(answer_and_score(c, t, 6) for t in TASKS))
    assert {quality_of(a) for a, _ in results} <= {8, 9}
    assert all(7 <= s <= 10 for _, s in results)
    assert not any("(drifting)" in a for a, _ in results)
    # a JSON answer keeps valid JSON: the mark ends its "answer" string
    raw = await ask(c, worker_messages("give JSON", 0), response_format={"type": "json_object"})
    value = json.loads(raw)
    assert value["answer"].startswith("Sim answer to: give JSON") and quality_of(value["answer"]) in (8, 9)
    # a plan is not a task answer: no mark
    plan = await ask(c, [{"role": "user", "content": "Split the goal into 3 sub-tasks.\nGoal: x"}])
    assert quality_of(plan) is None and len(json.loads(plan)["subtasks"]) == 3
    await c.close()


async def test_drifting_json_answer_and_a_tiny_max_tokens_keep_the_mark(sim_factory):
    sim = sim_factory(drift_after_rounds=0, seed=5, output_tokens=(200, 200))
    c = client(sim)
    raw = await ask(c, worker_messages("json task", 3), response_format={"type": "json_object"})
    value = json.loads(raw)
    assert "(drifting)" in value["answer"] and 2 <= quality_of(value["answer"]) <= 4
    r = await c.chat.completions.create(model="sim-1", messages=worker_messages("short", 1), max_tokens=12)
    content = r.choices[0].message.content or ""
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens <= 12
    assert quality_of(content) is not None and r.usage.completion_tokens == estimate_tokens(content)
    await c.close()


# -- the judge on its own ----------------------------------------------------------------------


async def test_unmarked_answers_get_a_seeded_score_from_their_text(sim_factory):
    sim = sim_factory(seed=9)
    c = client(sim)
    texts = [f"A human-written answer number {i}: use exponential backoff." for i in range(12)]
    first = [json.loads(await ask(c, judge_messages("task", t)))["score"] for t in texts]
    again = [json.loads(await ask(c, judge_messages("task", t)))["score"] for t in texts]
    assert all(6 <= s <= 9 for s in first) and first == again and len(set(first)) > 1
    await c.close()


async def test_pairwise_compares_the_two_qualities(sim_factory):
    sim = sim_factory(drift_after_rounds=1, seed=2)
    c = client(sim)
    fresh = await ask(c, worker_messages(TASKS[0], 0))
    polluted = await ask(c, worker_messages(TASKS[0], 5))
    assert quality_of(fresh) - quality_of(polluted) >= 5

    async def better(a, b):
        verdict = json.loads(await ask(c, pair_messages(TASKS[0], a, b)))
        assert set(verdict) == {"better", "reason"} and verdict["reason"]
        return verdict["better"]

    assert await better(fresh, polluted) == "A"
    assert await better(polluted, fresh) == "B"
    assert await better(fresh, fresh) == "equal"
    # within 1 point is equal
    assert await better("text ⟨q7⟩", "other ⟨q8⟩") == "equal"
    assert await better("text ⟨q5⟩", "other ⟨q8⟩") == "B"
    stats = sim.stats()["judge"]
    assert stats == {"requests": 5, "pointwise": 0, "pairwise": 5, "prose": 0}
    await c.close()


async def test_the_first_verdicts_are_prose_then_a_re_ask_gets_json(sim_factory):
    sim = sim_factory(judge_prose_first=2, seed=1)
    c = client(sim)
    messages = judge_messages("task", "an answer ⟨q7⟩")
    prose = [await ask(c, messages) for _ in range(2)]
    for text in prose:
        assert text.startswith("I would rate this answer") and text.endswith("out of ten.")
        assert "{" not in text and not any(ch.isdigit() for ch in text)
    # the engine's re-ask appends the prose and a reminder: the verdict is on the same answer
    reask = [
        *messages,
        {"role": "assistant", "content": prose[-1]},
        {"role": "user", "content": 'That could not be read. Reply with the JSON object only: {"score": ...}'},
    ]
    verdict = json.loads(await ask(c, reask))
    assert 6 <= verdict["score"] <= 8
    pair = await ask(c, pair_messages("task", "x ⟨q9⟩", "y ⟨q2⟩"))
    assert json.loads(pair)["better"] == "A"
    # a patch re-arms it, for pairwise too
    sim.update_config(judge_prose_first=1)
    pair = await ask(c, pair_messages("task", "x ⟨q9⟩", "y ⟨q2⟩"))
    assert pair == "Having read both, I think the first answer is the stronger one."
    assert sim.stats()["judge"] == {"requests": 5, "pointwise": 3, "pairwise": 2, "prose": 3}
    await c.close()


async def test_judge_calls_go_through_faults_and_rate_limits_but_ignore_quoted_markers(sim_factory):
    sim = sim_factory(error_rate=1.0)
    c = client(sim)
    with pytest.raises(openai.InternalServerError):
        await ask(c, judge_messages("task", "answer ⟨q8⟩"))
    sim.update_config(error_rate=0.0, rpm=60, burst_s=1.0)
    # a marker in the task quoted to the judge is the task's, not the judge's
    verdict = json.loads(await ask(c, judge_messages("flaky task [[sim:500]]", "answer ⟨q8⟩")))
    assert 7 <= verdict["score"] <= 9
    with pytest.raises(openai.RateLimitError):
        await ask(c, judge_messages("task", "answer ⟨q8⟩"))
    stats = sim.stats()
    assert stats["judge"] == {"requests": 3, "pointwise": 1, "pairwise": 0, "prose": 0}
    assert stats["server_errors"] == 1 and stats["rate_limited"] == 1 and stats["scripted"] == 0
    await c.close()


async def test_a_streamed_verdict_is_the_plain_one_with_usage(sim_factory):
    sim = sim_factory(seed=4)
    c = client(sim)
    messages = judge_messages("task", "answer ⟨q6⟩")
    plain = await c.chat.completions.create(model="sim-1", messages=messages)
    sim.reset()
    stream = await c.chat.completions.create(
        model="sim-1", messages=messages, stream=True, stream_options={"include_usage": True}
    )
    chunks = [ch async for ch in stream]
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == plain.choices[0].message.content and 5 <= json.loads(text)["score"] <= 7
    assert chunks[-1].usage.completion_tokens == plain.usage.completion_tokens == estimate_tokens(text)
    await c.close()


# -- determinism, stats, config ----------------------------------------------------------------


async def test_same_seed_same_answers_and_verdicts(sim_factory):
    async def run(seed: int) -> list[str]:
        sim = sim_factory(drift_after_rounds=1, seed=seed)
        c = client(sim)
        out = []
        for rounds in (0, 2, 4):
            for task in TASKS[:4]:
                answer = await ask(c, worker_messages(task, rounds))
                out += [answer, await ask(c, judge_messages(task, answer))]
        out.append(await ask(c, pair_messages("t", out[0], out[-2])))
        await c.close()
        return out

    one, two, other = await run(21), await run(21), await run(22)
    assert one == two
    assert one != other


async def test_stats_count_verdicts_and_the_quality_of_answers(sim_factory):
    sim = sim_factory(drift_after_rounds=1, seed=8)
    c = client(sim)
    qualities = []
    for rounds in (0, 3):
        answer = await ask(c, worker_messages("stats task", rounds))
        qualities.append(quality_of(answer))
        await ask(c, judge_messages("stats task", answer))
    with httpx.Client(trust_env=False) as h:
        stats = h.get(sim.url + "/sim/stats").json()
    assert stats["judge"] == {"requests": 2, "pointwise": 2, "pairwise": 0, "prose": 0}
    assert stats["quality"] == {"answers": 2, "mean": round(statistics.mean(qualities), 2)}
    assert stats["batch"]["chat"]["quality"] == {"answers": 0, "mean": None}
    sim.reset()
    assert sim.stats()["quality"] == {"answers": 0, "mean": None}
    await c.close()


def test_config_knobs_validate_parse_and_patch(sim_factory):
    assert SimConfig().drift_after_rounds is None and SimConfig().judge_prose_first == 0
    for bad in (
        {"drift_after_rounds": -1},
        {"drift_after_rounds": 1.5},
        {"drift_after_rounds": True},
        {"judge_prose_first": -2},
        {"judge_prose_first": "3"},
    ):
        with pytest.raises(ValueError, match=next(iter(bad))):
            SimConfig(**bad)
    cfg = SimConfig().patched({"drift_after_rounds": 0, "judge_prose_first": "2"})
    assert (cfg.drift_after_rounds, cfg.judge_prose_first) == (0, 2)
    assert cfg.patched({"drift_after_rounds": None}).drift_after_rounds is None
    with pytest.raises(ValueError):
        SimConfig().patched({"drift_after_rounds": "soon"})

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    ns = parser.parse_args(["--drift-after-rounds", "3", "--judge-prose-first", "1"])
    cfg = config_from_args(ns)
    assert (cfg.drift_after_rounds, cfg.judge_prose_first) == (3, 1)
    argv = config_to_argv(cfg)
    assert argv == ["--drift-after-rounds", "3", "--judge-prose-first", "1"]
    assert config_from_args(parser.parse_args(argv)) == cfg
    with pytest.raises(SystemExit):
        parser.parse_args(["--drift-after-rounds", "-1"])

    sim = sim_factory()
    with httpx.Client(trust_env=False) as h:
        r = h.post(sim.url + "/sim/config", json={"drift_after_rounds": 2, "judge_prose_first": 1})
        assert r.status_code == 200 and r.json()["config"]["drift_after_rounds"] == 2
        assert h.post(sim.url + "/sim/config", json={"drift_after_rounds": -3}).status_code == 400
        assert h.get(sim.url + "/sim/config").json()["config"]["judge_prose_first"] == 1


def test_pure_rules_agree_with_the_engine_side():
    # the memory message the simulator counts is the one the swarm renders
    assert MEMORY_HEADER == swarm_memory.MEMORY_HEADER
    for rounds in (0, 1, 4):
        assert memory_rounds(worker_messages("t", rounds)) == rounds
    memory = RollingMemory(window=3)
    for r in range(1, 6):
        memory.add(r, f"summary {r}")
    assert memory_rounds([{"role": "system", "content": memory.render(10_000)}]) == 3
    # a judge request is told by its first message only
    assert judge_request(judge_messages("t", "a")).kind == "pointwise"
    assert judge_request(pair_messages("t", "a", "b")).answers == ("a", "b")
    assert judge_request([{"role": "user", "content": "TASK:\nt\n\nANSWER:\na"}]) is None
    assert judge_request([{"role": "system", "content": "x"}, *judge_messages("t", "a")]) is None
    # the mark survives a cut when it fits, and never on the tool-results line
    content, n, finish = build_answer("p" * 40, 100, 0.3, 8, None, " ⟨q4⟩")
    assert finish == "length" and n <= 8 and content.endswith(" ⟨q4⟩") and n == estimate_tokens(content)
    content, n, finish = build_answer("p", 1, 0.3, None, "tool results: r", " ⟨q9⟩")
    assert content.splitlines() == ["Sim answer to: p", "tool results: r", "⟨q9⟩"]
