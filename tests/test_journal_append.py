"""`Journal.writer.append(events)`: the one write path. Each event is logged and applied to the tables it
projects onto (journal/projections.py) in one transaction; task states move by the board's one
transition rule (core/board.py); payloads the log must not hold travel on the events."""

from __future__ import annotations

import json
import random

import pytest
from swarm_tui.core import codec
from swarm_tui.core.batches import BatchLines
from swarm_tui.core.board import TaskBoard
from swarm_tui.core.call_errors import CallError, ErrorClass
from swarm_tui.core.errors import JournalWriteError
from swarm_tui.core.events import (
    AgentStepped,
    AnswerJudged,
    Attempt,
    AttemptStarted,
    BatchEnded,
    BatchProgress,
    BatchSubmitted,
    EndpointSwitched,
    RunStarted,
    TaskCancelled,
    TaskFailed,
    TaskQueued,
    TaskRetrying,
    TasksAdded,
    TaskState,
    TaskSucceeded,
    ToolCallEnded,
)
from swarm_tui.core.notes import SessionStarted, TaskTrimmed
from swarm_tui.core.task import Task
from swarm_tui.journal import Journal
from swarm_tui.run.outputs import failovers
from swarm_tui.view.follower import LogFollower

ANSWER = b'{"id":"c1","choices":[{"index":0,"message":{"role":"assistant","content":"caf\xc3\xa9"}}]}'
BOOM = CallError(ErrorClass.SERVER, "boom", 500)


def new_journal(tmp_path, count: int = 3, name: str = "run") -> Journal:
    tasks = [Task(i, f"t{i}", {"model": "m", "messages": [{"role": "user", "content": f"q{i}"}]}) for i in range(count)]
    journal = Journal.create(tmp_path / name, tasks, {"plan": {}, "job": {}})
    journal.begin_session()
    return journal


def attempt(index: int, number: int, outcome: str = "ok", **fields) -> Attempt:
    return Attempt(index, number, "sim", 1000.0 + number, 12.5, outcome, **fields)


def table(journal: Journal, sql: str) -> list[tuple]:
    return journal.writer.db.execute(sql).fetchall()


def test_an_answer_is_logged_and_kept_in_one_write(tmp_path):
    journal = new_journal(tmp_path)
    first = attempt(0, 1, request_id="req-1")
    journal.writer.append([AttemptStarted(0, 1, "sim"), TaskSucceeded(first, "café", response=ANSWER)])
    assert journal.queries.states()[0] is TaskState.SUCCEEDED
    assert table(journal, "SELECT idx, number, outcome, request_id FROM attempts") == [(0, 1, "ok", "req-1")]
    assert journal.queries.result_of(0)["response"] == json.loads(ANSWER)
    assert table(journal, "SELECT response FROM results") == [(ANSWER.decode(),)]  # the bytes as they came
    assert [type(e).__name__ for _, _, e in journal.history.log_since(0)] == [
        "SessionStarted",
        "AttemptStarted",
        "TaskSucceeded",
    ]
    journal.close()


def test_a_transaction_keeps_every_event_or_none_and_a_missing_payload_fails_it(tmp_path):
    journal = new_journal(tmp_path)
    before = len(journal.history.log_since(0))
    failed = attempt(0, 1, "failed", error=BOOM)
    with pytest.raises(ValueError, match="response"), journal.writer.transaction():
        journal.writer.append([TaskFailed(failed)])
        journal.writer.append([TaskSucceeded(attempt(1, 1), "x")])  # no response: the answer could not be kept
    assert len(journal.history.log_since(0)) == before
    assert journal.queries.states() == {0: TaskState.QUEUED, 1: TaskState.QUEUED, 2: TaskState.QUEUED}
    assert table(journal, "SELECT COUNT(*) FROM attempts") == [(0,)]
    assert table(journal, "SELECT COUNT(*) FROM results") == [(0,)]
    journal.close()


def test_payloads_travel_on_the_events_and_stay_out_of_the_log(tmp_path):
    journal = new_journal(tmp_path)
    transcript = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "q0"},
            {"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": "grep", "arguments": "{}"}}]},
        ],
    }
    stepped = AgentStepped(attempt(0, 1, "step"), 1, ("grep",), body=transcript)
    with_result = {**transcript, "messages": [*transcript["messages"], {"role": "tool", "content": "SECRET-HIT"}]}
    tool = ToolCallEnded(0, 1, "c1", "grep", True, 3.0, arguments='{"q": "x"}', result="SECRET-HIT", body=with_result)
    added = TasksAdded((3,), 4, tasks=(Task(3, "t3", {"messages": [{"role": "user", "content": "NEW-BODY"}]}),))
    succeeded = TaskSucceeded(attempt(1, 1), "café", response=ANSWER)
    journal.writer.append([stepped, tool, added, succeeded])

    assert journal.queries.body_of(0) == with_result  # the transcript, for a resumed run to go on from
    assert [(c["call_id"], c["arguments"], c["result"]) for c in journal.history.tool_calls_of(0)] == [
        ("c1", '{"q": "x"}', "SECRET-HIT")
    ]
    assert journal.queries.body_of(3) == added.tasks[0].body and journal.queries.states()[3] is TaskState.QUEUED
    logged = table(journal, "SELECT data FROM log")
    for text in ("SECRET-HIT", "NEW-BODY", '"choices"', "tool_calls"):
        assert not any(text in (data or "") for (data,) in logged), text
    read_back = [event for _, _, event in journal.history.log_since(0)][1:]
    assert read_back == [stepped, tool, added, succeeded]  # payloads are not compared
    assert [getattr(e, name) for e, name in zip(read_back, ("body", "result", "tasks", "response"), strict=True)] == [
        None,
        None,
        (),
        None,
    ]
    assert "SECRET-HIT" not in repr(tool) and "choices" not in repr(succeeded)
    assert codec.decode(*codec.encode(tool)).result is None
    journal.close()


@pytest.mark.parametrize("seed", range(4))
def test_the_journal_moves_task_states_by_the_boards_rule(tmp_path, seed):
    """Random event streams (late failures after a success, a cancel after a failure, requeues):
    after each event the journal's states are the board's, but for running, which is not kept on
    disk (it is the board of every event but the starts: a task runs only in a process)."""
    rng = random.Random(seed)
    journal = new_journal(tmp_path, count=6)
    board, durable = TaskBoard(range(6)), TaskBoard(range(6))
    numbers = dict.fromkeys(range(6), 0)
    for _ in range(300):
        i = rng.randrange(6)
        numbers[i] += 1
        n = numbers[i]
        event = rng.choice(
            [
                AttemptStarted(i, n, "sim"),
                TaskSucceeded(attempt(i, n), "ok", response=ANSWER),
                TaskFailed(attempt(i, n, "failed", error=BOOM)),
                TaskRetrying(attempt(i, n, "retry", error=BOOM), 0.5),
                TaskCancelled(i, attempt(i, n, "cancelled") if rng.random() < 0.5 else None),
                TaskQueued(i, TaskState.FAILED),
                AgentStepped(attempt(i, n, "step"), 1, ("t",), body={"messages": []}),
            ]
        )
        starts = isinstance(event, AttemptStarted | AgentStepped)
        if starts and board.states[i].is_final:
            continue  # nothing starts a finished task (late failures after a success do come)
        board.apply(event)
        if not starts:
            durable.apply(event)
        journal.writer.append([event])
        assert journal.queries.states() == durable.states, event
        if board.states[i] is not TaskState.RUNNING:
            assert journal.queries.states()[i] is board.states[i]
    results = dict(table(journal, "SELECT idx, ok FROM results"))
    for i, state in journal.queries.states().items():
        assert (results.get(i) == 1) == (state is TaskState.SUCCEEDED), (i, state, results.get(i))
        if state is TaskState.FAILED:
            assert results[i] == 0
    journal.close()


def dump(journal: Journal) -> dict[str, list[tuple]]:
    """A journal's tables, without what depends on the instant they were written."""
    return {
        "tasks": table(journal, "SELECT idx, custom_id, body, state, attempts FROM tasks ORDER BY idx"),
        "attempts": table(
            journal,
            "SELECT idx, number, outcome, endpoint, status, error_class, request_id, "
            "prompt_tokens, cost_usd FROM attempts ORDER BY idx, number, outcome",
        ),
        "results": table(journal, "SELECT idx, ok, request_id, response, error FROM results ORDER BY idx"),
        "tool_calls": table(journal, "SELECT idx, step, call_id, name, arguments, result, ok FROM tool_calls"),
        "judgments": table(journal, "SELECT idx, score, reason, round FROM judgments"),
        "batches": table(
            journal, "SELECT id, batch_id, status, counts, output_file_id, error_file_id, ended_at IS NULL FROM batches"
        ),
    }


def test_the_record_wrappers_write_what_append_writes(tmp_path):
    """What the engine does today (record_*) and what it will do (append with payloads): the same tables."""
    old, new = new_journal(tmp_path, 5, "old"), new_journal(tmp_path, 5, "new")
    call = {"id": "c1", "function": {"name": "grep", "arguments": "{}"}}
    lost, loser = attempt(3, 2, "cancelled"), attempt(3, 3, "hedge_lost")
    old.records.record_success(attempt(0, 1), ANSWER)
    new.writer.append([TaskSucceeded(attempt(0, 1), "", response=ANSWER)])
    old.records.record_retry(attempt(1, 1, "retry", error=BOOM, retry_in_s=0.5))
    new.writer.append([TaskRetrying(attempt(1, 1, "retry", error=BOOM, retry_in_s=0.5), 0.5)])
    old.records.record_failure(attempt(1, 2, "failed", error=BOOM))
    new.writer.append([TaskFailed(attempt(1, 2, "failed", error=BOOM))])
    old.records.requeue([1])
    new.writer.append([TaskQueued(1, TaskState.FAILED)])
    old.records.record_step(attempt(2, 1, "step"), {"messages": ["step 1"]})
    new.writer.append([AgentStepped(attempt(2, 1, "step"), 1, ("grep",), body={"messages": ["step 1"]})])
    other = {"id": "c2", "function": {"name": "add", "arguments": '{"a": 1}'}}
    both = {"messages": ["step 1", "found", "2"]}
    old.records.record_tool_calls(2, 1, [(call, "found", True, 2.0), (other, "2", True, 1.0)], both)
    new.writer.append(
        [
            ToolCallEnded(2, 1, "c1", "grep", True, 2.0, arguments="{}", result="found"),
            ToolCallEnded(2, 1, "c2", "add", True, 1.0, arguments='{"a": 1}', result="2", body=both),
        ]
    )
    old.records.record_cancelled([3, 4], [lost, loser])
    new.writer.append([TaskCancelled(3, lost), TaskCancelled(3, loser), TaskCancelled(4)])
    old.records.record_judgment(0, 8.0, "fine", 2)
    new.writer.append([AnswerJudged(0, 8.0, "fine", 2)])
    old.records.add_tasks([Task(5, "t5", {"messages": []})])
    new.writer.append([TasksAdded((5,), 6, tasks=(Task(5, "t5", {"messages": []}),))])
    for journal in (old, new):
        row = journal.records.record_batch_intent("sim/batch", "file-1", [(4, 1), (5, 1)])
        assert row.row == 1
    old.records.record_batch_created(1, "batch-1", "validating")
    new.writer.append([BatchSubmitted("batch-1", "sim/batch", (4, 5), (1, 1), "file-1", 1.0, row=1)])
    old.records.record_batch_progress(1, "in_progress", {"completed": 1, "total": 2})
    new.writer.append([BatchProgress("batch-1", "in_progress", 1, 0, 2, row=1, counts={"completed": 1, "total": 2})])
    lines = BatchLines(succeeded=[(attempt(4, 1), {"choices": []})], failed=[attempt(5, 1, "failed", error=BOOM)])
    old.records.record_batch_lines(1, "completed", ("out-1", None), lines)
    new.writer.append(
        [
            TaskSucceeded(attempt(4, 1), "", response={"choices": []}),
            TaskFailed(attempt(5, 1, "failed", error=BOOM)),
            BatchEnded("batch-1", "completed", 1, 1, 0, row=1, files=("out-1", None)),
        ]
    )
    assert dump(old) == dump(new)
    assert dump(new)["tasks"][3][3:] == ("cancelled", 3)  # a cut call's number is taken: resume numbers on
    old.close()
    new.close()


def test_the_runs_notes_are_typed_events_of_the_one_log(tmp_path):
    journal = new_journal(tmp_path)
    assert not journal.history.old_events() and not table(journal, "SELECT 1 FROM sqlite_master WHERE name = 'events'")
    journal.records.log_event("trimmed", {"index": 1, "custom_id": "t1"})
    journal.records.log_event(
        "failover", {"to": "x", "reason": "down", "from_primary": True}
    )  # EndpointSwitched says it
    with pytest.raises(ValueError, match="no event"):
        journal.records.log_event("first")
    assert [event for _, event in journal.history.logged(TaskTrimmed, EndpointSwitched)] == [TaskTrimmed(1, "t1")]
    follower = LogFollower(journal, range(3))  # a view replaying the log sees what a live one sees
    seen: list = []
    follower.subscribe(seen.append)
    follower.poll()
    assert seen == [] and follower.seq == len(journal.history.log_since(0))
    journal.close()
    again = Journal.open(tmp_path / "run")
    assert again.begin_session() == 2
    assert [type(e) for _, _, e in again.history.log_since(0)].count(SessionStarted) == 2
    again.close()


def test_failovers_say_whether_they_left_the_primary(tmp_path):
    journal = new_journal(tmp_path)
    journal.writer.append(
        [
            RunStarted(3, 3, 4, "p", False),
            EndpointSwitched("p/fallback", "the primary is down"),
            EndpointSwitched("p/fallback", "the probe failed"),  # from the fallback to the fallback
            EndpointSwitched("p", "back to the primary"),
            RunStarted(3, 1, 4, "p", False),  # a resumed run starts on its primary
            EndpointSwitched("p/fallback", "the judge said so", from_primary=True),
        ]
    )
    assert [(f.to, f.from_primary) for f in failovers(journal)] == [
        ("p/fallback", True),
        ("p/fallback", False),
        ("p", False),
        ("p/fallback", True),
    ]
    journal.close()


def test_a_journal_that_cannot_be_written_keeps_nothing_of_the_append_and_says_why(tmp_path):
    journal = new_journal(tmp_path)
    journal.close()
    readonly = Journal.open(tmp_path / "run", readonly=True)
    with pytest.raises(JournalWriteError, match="read"):
        readonly.writer.append([TaskSucceeded(attempt(0, 1), "x", response=ANSWER)])
    with pytest.raises(JournalWriteError):  # broken for good: nothing more is tried
        readonly.writer.append([TaskQueued(0, TaskState.CANCELLED)])
    assert readonly.queries.states()[0] is TaskState.QUEUED
    readonly.close()
