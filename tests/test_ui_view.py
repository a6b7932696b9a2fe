"""The console's view model: `RunView` is the one reducer the front ends read, it
imports no Textual, it says what changed for a screen to paint; one actions table makes the
bindings, the palette and the steering rules."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import swarm_tui.view
from swarm_tui.config import Config
from swarm_tui.core.call_errors import CallError, ErrorClass
from swarm_tui.core.events import (
    AgentStepped,
    AnswerJudged,
    Attempt,
    AttemptStarted,
    BatchSubmitted,
    ConcurrencyChanged,
    EndpointSwitched,
    PhaseChanged,
    RateLimitsLearned,
    RunFinished,
    RunPaused,
    RunStarted,
    TaskFailed,
    TaskRetrying,
    TaskState,
    TaskSucceeded,
)
from swarm_tui.core.usage import Usage
from swarm_tui.engine import EngineSettings
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.ui.app import KEY_SCOPES, make_app
from swarm_tui.ui.commands import COMMANDS
from swarm_tui.ui.keys import own_bindings
from swarm_tui.view import actions
from swarm_tui.view.run_view import RunView
from textual.app import App

from tests.helpers import wait_until
from tests.scripted_run import ScriptedRun, load_recording, snapshot_job

VIEW_MODULES = sorted(f"swarm_tui.view.{m.name}" for m in pkgutil.iter_modules(swarm_tui.view.__path__))


def test_the_view_and_the_sources_import_no_textual():
    modules = [
        "swarm_tui.view",
        *VIEW_MODULES,
        "swarm_tui.view.follower",
        "swarm_tui.frontend.attached",
        "swarm_tui.frontend.progress_lines",
    ]
    code = (
        f"import importlib, sys\nfor name in {modules!r}: importlib.import_module(name)\n"
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] == 'textual')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert "swarm_tui.view.run_view" in VIEW_MODULES and "swarm_tui.view.actions" in VIEW_MODULES
    assert out == "", f"the view imports Textual: {out}"


def attempt(index: int, number: int, outcome: str, error: ErrorClass | None = None, latency_ms: float = 100.0):
    failure = CallError(error, "boom", 500) if error else None
    return Attempt(
        index,
        number,
        "sim",
        1_700_000_000.0 + number,
        latency_ms,
        outcome,
        status=500 if error else 200,
        error=failure,
        usage=Usage(10, 5),
        cost_usd=0.001,
    )


def test_apply_says_what_changed_for_a_screen_to_paint():
    view = RunView(range(4))
    view.apply([RunStarted(4, 4, 2, "sim", True)])
    changes = view.apply(
        [
            AttemptStarted(0, 1, "sim"),
            AttemptStarted(1, 1, "sim"),
            TaskRetrying(attempt(1, 1, "retry", ErrorClass.SERVER), 1.5),
            TaskSucceeded(attempt(0, 1, "ok", latency_ms=240.0), "an answer"),
            AttemptStarted(2, 1, "sim"),
            TaskFailed(attempt(2, 1, "failed", ErrorClass.AUTH)),
            AttemptStarted(3, 1, "sim"),
            AgentStepped(attempt(3, 1, "step"), 1, ("lookup",)),
            EndpointSwitched("fallback", "5xx above 1%"),
        ],
        at=1_700_000_100.0,
    )
    assert changes.events == 9 and changes.agents == {0, 1, 2, 3}
    assert changes.started == {0, 2, 3}, "agent 2's retry row came after its start: not a retry yet"
    assert [(f.index, f.kind, f.delay_s) for f in changes.failures] == [(1, "retry", 1.5), (2, "final", None)]
    assert changes.latencies == [240.0] and changes.finished is None
    assert [news.kind for news in changes.news] == ["failover"]
    assert dict(view.states) == {
        0: TaskState.SUCCEEDED,
        1: TaskState.RETRYING,
        2: TaskState.FAILED,
        3: TaskState.RUNNING,
    }
    assert (view.stats.sent, view.stats.succeeded, view.stats.failed, view.stats.retried) == (4, 1, 1, 1)
    agents = view.agents
    assert agents.last_failed == 2 and agents.latency == {0: 240.0}
    assert agents.step_of(3) == (1, ("lookup",)) and agents.in_tools == 1
    assert set(agents.in_flight) == set(), "every call started has ended (3 is in its tools)"
    assert view.phases.detail == "now sending to fallback: 5xx above 1%"
    assert not view.take_changes(), "taken: nothing is left for the next paint"

    changes = view.apply([AttemptStarted(1, 2, "sim")], at=1_700_000_200.0)
    assert changes.started == {1} and view.agents.in_flight[1].started_at == 1_700_000_200.0


def test_a_round_ends_as_news_and_only_the_last_run_as_the_end():
    view = RunView(range(2))
    ended = view.apply(
        [
            PhaseChanged("fan-out", "round 1/2: 2 agents"),
            RunStarted(2, 2, 2, "sim", True),
            RunFinished(2, 0, 0, False),
        ]
    )
    assert ended.finished is None and [n.kind for n in ended.news] == ["phase", "run_started", "round_finished"]
    assert view.phases.phase == "RUNNING" and "round 2 next" in view.phases.detail
    ended = view.apply(
        [PhaseChanged("fan-out", "round 2/2: 2 agents"), RunStarted(2, 2, 2, "sim", True), RunFinished(2, 0, 0, False)]
    )
    assert ended.finished == RunFinished(2, 0, 0, False) and "round_finished" not in [n.kind for n in ended.news]
    assert view.phases.phase == "DONE"


def test_a_replay_shows_earlier_sessions_without_news_or_their_pace_or_their_limit():
    view = RunView(range(2))
    view.replay(
        [
            (1_700_000_000.0, RunStarted(2, 2, 8, "sim", True)),
            (1_700_000_000.0, RateLimitsLearned(600, None)),
            (1_700_000_001.0, RunPaused()),
            (1_700_000_002.0, AttemptStarted(0, 1, "sim")),
            (1_700_000_003.0, TaskSucceeded(attempt(0, 1, "ok"), "")),
            (1_700_000_004.0, BatchSubmitted("batch_1", "sim/batch", (1,), (1,))),
            (1_700_000_005.0, AnswerJudged(0, 8.0, "fine")),
            (1_700_000_006.0, ConcurrencyChanged(4, "user", ceiling=4)),
        ]
    )
    changes = view.take_changes()
    assert changes.events == 8 and not changes.news, "earlier sessions' news is not announced"
    assert changes.agents == {0, 1} and changes.latencies == [100.0]
    figures = view.figures
    assert (figures.limit, figures.ceiling, figures.paused, figures.started) == (None, None, False, False)
    assert figures.rate_limits == (600, None) and set(figures.batches) == {"batch_1"} and figures.quality.judged
    assert view.pace.started_at is None, "their pace is not this session's"
    assert view.stats.succeeded == 1 and view.stats.rates() == (0.0, 0.0), "counted, not as recent rates"
    assert view.agents.score_of(0) == 8.0 and view.agents.is_in_batch(1)


def test_a_view_without_a_screen_collects_nothing_but_tells_its_news():
    view = RunView(range(1), screen=False)
    assert view.tell(RunPaused()) is not None and view.figures.paused
    view.observe(AttemptStarted(0, 1, "sim"))
    assert not view.take_changes() and view.states[0] is TaskState.RUNNING and view.stats.in_flight == 1
    assert not view.agents.in_flight, "no cell to paint: no agents' facts kept"


# ----------------------------------------------------------------- the actions table


def test_the_journal_s_notes_pass_a_view_by(tmp_path):
    """The journal's typed notes share its log with the engine's events (core/notes.py), but they
    move no task and are no news: a view that tails the log shows exactly what one fed the events
    alone does, and its listeners (the replayed stats, the screen) never see a note."""
    from swarm_tui.core.notes import JudgeFailed, MemoryFlushed, SwarmFinished, TaskTrimmed
    from swarm_tui.core.task import Task
    from swarm_tui.journal import Journal
    from swarm_tui.view.follower import LogFollower

    tasks = [Task(i, f"t{i}", {"model": "m", "messages": [{"role": "user", "content": f"q{i}"}]}) for i in range(2)]
    journal = Journal.create(tmp_path / "run", tasks, {"plan": {}, "job": {}})
    journal.begin_session()
    events = [
        RunStarted(2, 2, 2, "sim", True),
        AttemptStarted(0, 1, "sim"),
        TaskRetrying(attempt(0, 1, "retry", ErrorClass.SERVER), 1.5),
        AttemptStarted(0, 2, "sim"),
        TaskSucceeded(attempt(0, 2, "ok", latency_ms=240.0), "an answer", response=b'{"id":"c"}'),
        AttemptStarted(1, 1, "sim"),
        TaskFailed(attempt(1, 1, "failed", ErrorClass.AUTH)),
        RunFinished(1, 1, 0, False),
    ]
    notes = [TaskTrimmed(1, "t1"), JudgeFailed(0, "no score"), MemoryFlushed(1), SwarmFinished(None, "fan-out")]
    journal.writer.append(events[:3] + notes[:2] + events[3:6] + notes[2:] + events[6:])
    follower = LogFollower(journal)
    heard: list = []
    follower.subscribe(heard.append)
    assert follower.poll() == len(events), "the notes are not delivered"
    assert heard == events
    changes = follower.take_changes()
    alone = RunView(range(2))
    expected = alone.apply(events)
    assert changes.events == expected.events == len(events)
    assert [n.kind for n in changes.news] == [n.kind for n in expected.news]
    assert changes.agents == expected.agents and changes.latencies == expected.latencies == [240.0]
    assert [(f.index, f.kind) for f in changes.failures] == [(f.index, f.kind) for f in expected.failures]
    assert dict(follower.states) == dict(alone.states) == {0: TaskState.SUCCEEDED, 1: TaskState.FAILED}
    stats = follower.stats
    assert (stats.sent, stats.succeeded, stats.failed, stats.retried) == (3, 1, 1, 1)
    assert (follower.phases.phase, follower.phases.detail) == (alone.phases.phase, alone.phases.detail)
    journal.close()


def test_every_binding_comes_from_the_actions_table_and_every_action_is_bound():
    bound = {binding.id: binding for _, scope in KEY_SCOPES for binding in own_bindings(scope)}
    assert set(bound) == {action.id for action in actions.ACTIONS}
    for action in actions.ACTIONS:
        binding = bound[action.id]
        assert (binding.action, binding.description, binding.show) == (action.action, action.label, action.show)
    assert actions.BY_ID["app.palette"].keys == App.COMMAND_PALETTE_BINDING


def test_the_palette_and_the_steering_rules_come_from_the_same_table():
    assert [name for _, name, _ in COMMANDS] == [
        "Retry failed agents",
        "Retry the agent under the cursor",
        "Pause / resume the run",
        "Abort the run",
        "Raise the concurrency ceiling",
        "Lower the concurrency ceiling",
        "Next theme",
        "Toggle the latency heat view",
        "Provider pane",
        "Cost projection",
        "Aggregate",
        "Flush the rolling memory",
        "Write the run's report",
        "Help",
        "Quit",
    ]
    assert {action.name for action in actions.STEERED} == {
        "retry_failed",
        "retry_cursor",
        "cancel_cursor",
        "toggle_pause",
        "abort",
        "concurrency",
        "aggregate",
        "flush_memory",
    }
    assert actions.FOOTER_LABELS == ("app.pause", "app.quit")
    assert actions.LEGACY_IDS["retry-failed"] == "app.retry_failed" and len(actions.LEGACY_IDS) == 14


# ----------------------------------------------------------------- painting a burst's end


async def test_a_burst_s_last_events_reach_the_panels_without_waiting_for_another(tmp_path, monkeypatch):
    """The panels repaint at most at 4 Hz: an event that comes just after a paint is painted at
    the next tick past that, not at the next event (or second)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "swarm-100-demo").mkdir()
    now = [5000.0]
    source = ScriptedRun(
        load_recording(),
        snapshot_job(),
        Path("swarm-100-demo"),
        profile=ProviderProfile("sim"),
        settings=EngineSettings.of(concurrency=50),
        clock=lambda: now[0],
    )
    app = make_app(source, config=Config(path=tmp_path / "config.toml"), start=False, clock=lambda: now[0])
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        now[0] += 1.0
        app.view.observe(RateLimitsLearned(1234, None))
        app.drain()
        now[0] += 0.1  # within the panels' 4 Hz
        app.view.observe(RateLimitsLearned(777, None))
        app.drain()
        assert "rpm 1.2k" in app.run_panel.text.plain
        now[0] += 0.2  # past it; no event comes
        await wait_until(
            lambda: "rpm 777" in app.run_panel.text.plain, "the last rate limits painted", step=pilot.pause
        )
