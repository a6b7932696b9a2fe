"""The TUI driven like a user would (Textual's Pilot), on a real simulator over loopback HTTP.

Each test runs a real `SwarmSession` (journal, engine, provider client) as the app's worker
and presses keys; the assertions read the engine, the journal and the widgets.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from swarm_tui.config import Config
from swarm_tui.core.events import AttemptStarted
from swarm_tui.engine import TaskState
from swarm_tui.run.session import SwarmSession
from swarm_tui.ui.app import SwarmApp, make_app
from swarm_tui.ui.screens.detail import AgentDetailScreen
from swarm_tui.ui.screens.dialogs import ConfirmScreen, HelpScreen
from swarm_tui.ui.screens.provider import ProviderScreen
from swarm_tui.ui.steering import concurrency_step
from swarm_tui.ui.widgets.errorlog.error_log import ErrorLog
from textual.pilot import Pilot
from textual.widgets import DataTable

from tests.conftest import read_jsonl
from tests.helpers import open_session, wait_until

FLAKY = " [[sim:500x1]]"
"""The simulator answers 500 the first time it sees a body carrying this, then succeeds."""


async def wait_for(pilot: Pilot, condition, timeout: float = 10.0, what: str = "condition") -> None:
    """Let the app run until `condition()` holds (fails naming `what` if it never does), then let
    the screen catch up with its view: the view takes each event as it comes (`app.phase` moves
    at once), the widgets are painted at the next drain (4 Hz), and the test reads the widgets."""
    await wait_until(condition, what, timeout=timeout, step=lambda: pilot.pause(0.02))
    drain = getattr(pilot.app, "drain", None)
    if drain is not None:
        drain()
        await pilot.pause()


def on_top(app: SwarmApp, screen_type: type) -> Callable[[], bool]:
    return lambda: isinstance(app.screen, screen_type)


def app_for(session: SwarmSession, tmp_path) -> SwarmApp:
    return make_app(session, config=Config(path=tmp_path / "config.toml"))


def counts(session: SwarmSession) -> Counter:
    return Counter(session.engine.states.values())


async def test_r_reruns_the_failed_agents_and_they_end_done(tmp_path, sim):
    prompts = [f"task {i}" + (FLAKY if i % 4 == 0 else "") for i in range(24)]
    session = open_session(tmp_path, sim.base_url, prompts, max_attempts=1, concurrency=8)
    app = app_for(session, tmp_path)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: app.phase == "FINISHED", what="the first round to end")
            assert counts(session)[TaskState.FAILED] == 6
            log = app.query_one(ErrorLog)
            assert log.row_count == 6
            assert {str(log.get_row_at(i)[4]) for i in range(6)} == {"gave up"}
            assert app.check_action("retry_failed", ()) is True

            await pilot.press("r")
            await wait_for(pilot, lambda: app.phase == "DONE", what="the retried agents to finish")
            assert counts(session) == Counter({TaskState.SUCCEEDED: 24})
            assert app.check_action("retry_failed", ()) is None, "nothing left to retry: r is disabled"
            await pilot.press("q")
        assert app.return_value == 0
    finally:
        await session.aclose()
    ids = Counter(line["custom_id"] for line in read_jsonl(tmp_path / "run" / "results.jsonl"))
    assert len(ids) == 24 and set(ids.values()) == {1}
    assert read_jsonl(tmp_path / "run" / "errors.jsonl") == []


async def test_enter_on_an_error_row_opens_its_agent_and_sends_nothing_r_retries_it(tmp_path, sim):
    """Issue 25 changed the key contract on purpose: Enter on an error-log row used to re-send
    the call (a paid one); it opens the agent's detail now, and `R` in the log retries, saying
    first what that costs."""
    prompts = [f"task {i}" + (FLAKY if i in (3, 7) else "") for i in range(12)]
    session = open_session(
        tmp_path,
        sim.base_url,
        prompts,
        max_attempts=1,
        concurrency=4,
        prices={"custom/sim-1": {"input": 1.0, "cached_input": 0.5, "output": 2.0}},
    )
    app = app_for(session, tmp_path)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.phase == "FINISHED")
            log = app.query_one(ErrorLog)
            log.focus()
            log.move_cursor(row=[str(log.get_row_at(i)[1]) for i in range(2)].index("#4"))
            await wait_for(pilot, lambda: "R retry #4 ≈$" in str(log.border_title), what="what R costs, said first")
            sent = sim.stats()["requests"]
            await pilot.press("enter")
            await wait_for(pilot, on_top(app, AgentDetailScreen), what="enter to open the row's agent")
            assert app.screen.index == 3 and "FAILED" in str(app.screen.query_one("#detail-title").content)
            await pilot.pause(0.3)
            assert sim.stats()["requests"] == sent and session.engine.states[3] is TaskState.FAILED, "nothing sent"
            await pilot.press("escape")
            await wait_for(pilot, lambda: not isinstance(app.screen, AgentDetailScreen), what="escape to go back")
            log.focus()
            await pilot.press("R")
            await wait_for(pilot, lambda: session.engine.states[3] is TaskState.SUCCEEDED, what="agent 4 retried")
            assert session.engine.states[7] is TaskState.FAILED, "only the selected agent was retried"
            assert any(
                n.message.startswith("Retrying agent 4 (≈$") and "the run's mean per answer" in n.message
                for n in app._notifications
            ), [n.message for n in app._notifications]

            app.grid.focus()
            app.grid.move_to(7)
            await pilot.press("enter")
            await wait_for(pilot, on_top(app, AgentDetailScreen), what="the agent detail to open")
            detail = app.screen
            assert isinstance(detail, AgentDetailScreen) and detail.index == 7
            assert "FAILED" in str(detail.query_one("#detail-title").content)
            await pilot.press("r")
            await wait_for(pilot, lambda: session.engine.states[7] is TaskState.SUCCEEDED, what="agent 8 retried")
            await wait_for(
                pilot,
                lambda: "DONE" in str(detail.query_one("#detail-title").content),
                what="the detail screen to show the retry's outcome",
            )
            attempts = str(detail.query_one("#detail-attempts").content)
            assert " 1  " in attempts and " 2  " in attempts and "server_error" in attempts, "both attempts listed"
            await pilot.press("escape")
            # (its outputs written first: the test's end stops the app at once, and its session is closed)
            await wait_for(
                pilot,
                lambda: session.summary is not None and session.summary.succeeded == 12,
                what="the retried run's outputs",
            )
            await pilot.press("q")
        assert app.return_value == 0
    finally:
        await session.aclose()


async def test_pause_stops_dispatch_and_resume_finishes(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=150.0, latency_sigma=0.0)
    session = open_session(tmp_path, sim.base_url, [f"task {i}" for i in range(40)], concurrency=4)
    app = app_for(session, tmp_path)
    stats = session.engine.stats
    started_while_paused = []
    session.engine.subscribe(
        lambda e: isinstance(e, AttemptStarted) and session.engine.paused and started_while_paused.append(e)
    )
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: stats.sent >= 4, what="the first calls")
            await pilot.press("p")
            await wait_for(pilot, lambda: session.engine.paused and app.phase == "PAUSED", what="p to pause the run")
            # a slot freed while dispatch still worked would be refilled at once: none in flight,
            # with tasks queued, means nothing was sent since the pause
            await wait_for(pilot, lambda: stats.in_flight == 0, what="in-flight calls to finish")
            assert started_while_paused == [], "nothing new was sent while paused"
            assert counts(session)[TaskState.QUEUED] == 40 - stats.succeeded > 0
            await pilot.press("p")
            await wait_for(pilot, lambda: not session.engine.paused, what="p to resume the run")
            await wait_for(pilot, lambda: app.phase == "DONE", what="the run to finish")
            await pilot.press("q")
        assert app.return_value == 0
    finally:
        await session.aclose()


async def test_abort_leaves_a_journal_that_resume_finishes(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=200.0, latency_sigma=0.0)
    prompts = [f"task {i}" for i in range(60)]
    session = open_session(tmp_path, sim.base_url, prompts, concurrency=5)
    app = app_for(session, tmp_path)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: session.engine.stats.succeeded >= 5, what="some agents done")
            await pilot.press("a")
            await wait_for(pilot, on_top(app, ConfirmScreen), what="a to ask for confirmation")
            await pilot.press("y")
            await wait_for(pilot, lambda: app.phase == "ABORTED", what="the abort to land")
            done = counts(session)[TaskState.SUCCEEDED]
            # unfinished: the calls cut (cancelled: they may be billed) and the tasks never sent,
            # which stay queued (a stop costs nothing per task it never started)
            cut, never_sent = counts(session)[TaskState.CANCELLED], counts(session)[TaskState.QUEUED]
            assert 5 <= done < 60 and cut + never_sent == 60 - done and cut <= 5
            assert app.check_action("abort", ()) is None, "nothing to abort any more"
            await pilot.press("q")
        assert app.return_value == 130
    finally:
        await session.aclose()

    resumed = SwarmSession.reopen(tmp_path / "run")
    try:
        finished = await resumed.run()
    finally:
        await resumed.aclose()
    assert (finished.succeeded, finished.failed, finished.cancelled) == (60, 0, 0)
    ids = Counter(line["custom_id"] for line in read_jsonl(tmp_path / "run" / "results.jsonl"))
    assert len(ids) == 60 and set(ids.values()) == {1}


async def test_quit_during_a_run_asks_then_aborts_with_130(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=300.0, latency_sigma=0.0)
    session = open_session(tmp_path, sim.base_url, [f"task {i}" for i in range(30)], concurrency=3)
    app = app_for(session, tmp_path)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: session.engine.stats.sent >= 3)
            await pilot.press("q")
            await wait_for(pilot, on_top(app, ConfirmScreen), what="quitting a live run to ask first")
            await pilot.press("n")
            await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmScreen), what="n to close the question")
            assert session.engine.running, "n keeps the run going"
            await pilot.press("q", "y")
            await wait_for(pilot, lambda: not app.is_running, what="the app to exit")
        assert app.return_value == 130
        assert not session.engine.running
    finally:
        await session.aclose()
    resumed = SwarmSession.reopen(tmp_path / "run")
    try:
        states = Counter(resumed.engine.states.values())
    finally:
        await resumed.aclose()
    # the rest is unfinished until the resumed engine runs it: the calls cut cancelled, the tasks never sent queued
    unfinished = states[TaskState.CANCELLED] + states[TaskState.QUEUED]
    assert states[TaskState.SUCCEEDED] < 30 and unfinished == 30 - states[TaskState.SUCCEEDED]
    assert states[TaskState.CANCELLED] <= 3  # at most the calls in flight (concurrency 3)


async def test_keys_steer_concurrency_theme_heat_help_and_provider(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=500.0, latency_sigma=0.0)
    session = open_session(tmp_path, sim.base_url, [f"task {i}" for i in range(200)], concurrency=20)
    app = app_for(session, tmp_path)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: session.engine.running)
            await pilot.press("plus")
            assert concurrency_step(20, 1) == 25
            await wait_for(pilot, lambda: app.source.ceiling == 25, what="+ to raise the concurrency to 25")
            await pilot.press("minus", "minus")
            await wait_for(pilot, lambda: app.source.ceiling == 15, what="- - to lower the concurrency to 15")
            theme = app.theme
            await pilot.press("t")
            await wait_for(pilot, lambda: app.theme != theme, what="t to change the theme")
            assert app.theme in ("swarm-light", "swarm-high-contrast", "swarm-dark")
            await pilot.press("h")
            await wait_for(pilot, lambda: app.grid.heat, what="h to switch the grid to heat")
            await pilot.press("question_mark")
            await wait_for(pilot, on_top(app, HelpScreen), what="? to open the help")
            await pilot.press("escape", "e")
            await wait_for(pilot, on_top(app, ProviderScreen), what="e to open the provider screen")
            await pilot.press("escape")
            session.engine.abort()
            await wait_for(pilot, lambda: not session.engine.running)
            await pilot.press("q")
        assert app.return_value == 130
    finally:
        await session.aclose()


def test_concurrency_steps():
    ups = [concurrency_step(n, 1) for n in (1, 9, 10, 12, 45, 50, 190, 200, 230)]
    assert ups == [2, 10, 15, 15, 50, 60, 200, 250, 250]
    downs = [concurrency_step(n, -1) for n in (1, 2, 10, 12, 50, 51, 60, 200, 230, 250)]
    assert downs == [1, 1, 9, 10, 45, 50, 50, 190, 200, 200]


async def test_p_after_an_abort_resumes_the_unfinished_agents_in_place(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=100.0, latency_sigma=0.0)
    session = open_session(tmp_path, sim.base_url, [f"task {i}" for i in range(40)], concurrency=4)
    app = app_for(session, tmp_path)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: session.engine.stats.succeeded >= 4)
            await pilot.press("a", "y")
            await wait_for(pilot, lambda: app.phase == "ABORTED")
            assert app.check_action("toggle_pause", ()) is True, "p resumes what the abort left"
            await pilot.press("p")
            await wait_for(pilot, lambda: app.phase == "DONE", what="the resumed run to finish")
            await pilot.press("q")
        assert app.return_value == 0
    finally:
        await session.aclose()
    assert len(read_jsonl(tmp_path / "run" / "results.jsonl")) == 40


async def test_a_planned_swarm_shows_its_plan_as_agents_then_its_aggregate(tmp_path, sim):
    from swarm_tui.engine import EngineSettings
    from swarm_tui.jobs import load_job
    from swarm_tui.providers.profile import ProviderProfile
    from swarm_tui.run.session import RunPlan
    from swarm_tui.ui.screens.aggregate import AggregateScreen
    from swarm_tui.util.locations import bundled

    job = load_job(bundled("sample_jobs") / "research-swarm.toml")
    session = SwarmSession.open_new(
        job, RunPlan(ProviderProfile("custom", base_url=sim.base_url), EngineSettings()), tmp_path / "run"
    )
    app = app_for(session, tmp_path)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            assert app.grid.count == 0  # nothing to show until the planner answers
            assert app.check_action("aggregate", ()) is False
            await wait_for(pilot, lambda: app.phase == "DONE", what="the swarm to end")
            assert app.phase_detail == "12 done, 0 failed; aggregate written"
            assert app.grid.count == 12
            assert "Sub-task 3 of 12" in session.tasks[2].prompt
            await pilot.press("down", "right", "enter")  # the detail of a planned agent opens
            await wait_for(pilot, on_top(app, AgentDetailScreen), what="the planned agent's detail to open")
            assert app.screen.index == 11
            await pilot.press("escape")
            await wait_for(pilot, lambda: not isinstance(app.screen, AgentDetailScreen), what="escape to close it")
            assert app.check_action("aggregate", ()) is True
            await pilot.press("g")
            await wait_for(pilot, on_top(app, AggregateScreen), what="g to open the aggregate")
            await pilot.press("escape")
    finally:
        await session.aclose()
    assert (tmp_path / "run" / "aggregate.md").exists()


async def test_dollar_opens_the_cost_projection_of_this_runs_tokens(tmp_path, sim):
    from swarm_tui.ui.screens.estimate import EstimateScreen

    session = open_session(
        tmp_path,
        sim.base_url,
        [f"t{i}" for i in range(10)],
        prices={"custom/sim-1": {"input": 1.0, "cached_input": 0.5, "output": 2.0}},
    )
    app = app_for(session, tmp_path)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.phase == "DONE", what="the run to end")
            await pilot.press("dollar_sign")
            await wait_for(pilot, on_top(app, EstimateScreen), what="$ to open the cost projection")
            table = app.screen.query_one("#estimate-table", DataTable)
            assert "gpt-4.1" in {str(table.get_row_at(i)[0]) for i in range(table.row_count)}
            assert "150,000 tasks" in str(app.screen.query_one("#estimate-summary").render())
    finally:
        await session.aclose()


async def test_keys_from_the_config_remap_bindings_by_id(tmp_path, sim):
    session = open_session(tmp_path, sim.base_url, [f"t{i}" for i in range(5)])
    app = make_app(session, config=Config(path=tmp_path / "config.toml", keys={"help": "f1", "nonsense": "x"}))
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: app.phase == "DONE", what="the run to end")
            rows = [row for _, scope_rows in app.keys.help() for row in scope_rows]
            assert ("f1", "this help") in [(r.key, r.does) for r in rows]  # the help lists keys as bound now
            bound = {key: active.binding.action for key, active in app.active_bindings.items()}
            assert bound.get("f1") == "help" and bound.get("question_mark") != "help", "? no longer opens help"
            await pilot.press("f1")
            await wait_for(pilot, on_top(app, HelpScreen), what="f1 to open the help")
    finally:
        await session.aclose()


async def test_r_on_an_error_row_whose_agent_came_through_says_so_once_and_sends_nothing(tmp_path, sim):
    """Agent 4 failed once, then succeeded on its retry: its row stays in the error log. `R` there
    used to answer twice (the app explained the grid cursor's agent, the log asked to retry a done
    one): one toast now, about the row's agent, and nothing sent."""
    prompts = [f"task {i}" + (FLAKY if i == 3 else "") for i in range(8)]
    session = open_session(tmp_path, sim.base_url, prompts, max_attempts=2, concurrency=4)
    app = app_for(session, tmp_path)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: counts(session)[TaskState.SUCCEEDED] == 8, what="every agent done")
            log = app.query_one(ErrorLog)
            await wait_for(pilot, lambda: log.row_count == 1, what="agent 4's failed attempt in the log")
            log.focus()
            await wait_for(pilot, lambda: "#4 detail" in str(log.border_title), what="the row under the cursor")
            assert "R retry" not in str(log.border_title), "not offered: agent 4 is done"
            sent, before = sim.stats()["requests"], len(app._notifications)
            await pilot.press("R")
            await wait_for(pilot, lambda: len(app._notifications) > before, what="R to answer")
            await pilot.pause()  # (both came in the same key's handling, before)
            said = [n.message for n in list(app._notifications)[before:]]
            assert said == ["Agent 4 is done: nothing to retry (R retries a failed agent)."], said
            assert sim.stats()["requests"] == sent
            await pilot.press("q")
    finally:
        await session.aclose()
