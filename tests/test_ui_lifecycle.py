"""A run's life as the console says it: the
round a multi-round swarm is on and its final count, labels that match what a key does now,
Ctrl-C that aborts with 130, figures that stay honest after the end and across a resume, the
attempt in flight in an agent's detail, the message while tools start, the opt-in bell, and
planner or aggregator errors in the log. Driven with Pilot on real runs over loopback."""

from __future__ import annotations

import re

from swarm_tui.config import Config
from swarm_tui.core.events import RunFinished
from swarm_tui.engine import EngineSettings, TaskState
from swarm_tui.jobs import load_job
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.run.session import RunPlan, SwarmSession
from swarm_tui.ui.app import SwarmApp, make_app
from swarm_tui.ui.screens.detail import AgentDetailScreen
from swarm_tui.ui.widgets.errorlog.error_log import ErrorLog
from swarm_tui.ui.widgets.footer.key_footer import KeyFooter
from swarm_tui.view.news import average_rates
from swarm_tui.view.phase import PhaseView

from tests.helpers import open_session
from tests.test_ui_agent_cells import panel_text
from tests.test_ui_app import on_top, wait_for


def run_over(app: SwarmApp) -> bool:
    """The run's worker is over: its outputs are written (leaving before would close the
    journal under the thread that writes them)."""
    return app.lifecycle.worker is None or app.lifecycle.worker.is_finished


def footer_labels(app: SwarmApp) -> list[str]:
    from textual.widgets._footer import FooterKey

    return [f"{key.key_display} {key.description}" for key in app.screen.query_one(KeyFooter).query(FooterKey)]


def rounds_job(tmp_path, rounds: int = 6, agents: int = 8):
    path = tmp_path / "rounds.toml"
    path.write_text(
        f'name = "rounds"\nmodel = "sim-1"\ngoal = "six rounds"\n[tasks]\ncount = {agents}\n'
        f'prompt = "finding {{agent}}"\n[memory]\nrounds = {rounds}\n'
    )
    return load_job(path)


async def test_a_six_round_swarm_says_its_round_while_it_runs_and_never_done_before_its_end(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=60.0, latency_sigma=0.0)
    job = rounds_job(tmp_path)
    session = SwarmSession.open_new(
        job,
        RunPlan(ProviderProfile("custom", base_url=sim.base_url), EngineSettings.of(concurrency=8)),
        tmp_path / "run",
    )
    said = PhaseView()  # the console's phase, event by event (a drain may take several at once)
    seen: list[tuple[str, str]] = []

    def note(event) -> None:
        said.take(event)
        seen.append((said.phase, said.detail))

    session.engine.subscribe(note)
    app = make_app(session, config=Config(path=tmp_path / "config.toml"))
    painted: list[str] = []
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            update = app.run_panel.update_from

            def recording(source, grid, phase, detail, *args, **kwargs):
                painted.append(f"{phase} {detail}")
                update(source, grid, phase, detail, *args, **kwargs)

            app.run_panel.update_from = recording  # type: ignore[method-assign]
            await wait_for(
                pilot,
                lambda: not session.engine.running and app.phase == "DONE",
                timeout=60,
                what="the six rounds to end",
            )
            text = panel_text(app)
            assert text.startswith("DONE 48 done, 0 failed in 6 rounds"), text
            await wait_for(pilot, lambda: run_over(app), what="the run's outputs written")
    finally:
        await session.aclose()
    running = [detail for phase, detail in seen if phase == "RUNNING"]
    for number in range(1, 7):
        assert f"round {number}/6: 8 agents" in running, (number, running)
    for number in range(1, 6):
        assert any(
            d.startswith(f"round {number}/6 done (") and d.endswith(f"round {number + 1} next") for d in running
        ), number
    first_done = next(n for n, (phase, _) in enumerate(seen) if phase == "DONE")
    last_round = next(n for n, (_, detail) in enumerate(seen) if detail == "round 6/6: 8 agents")
    assert first_done > last_round, "never DONE between rounds"
    assert any(re.match(r"RUNNING round [1-6]/6", p) for p in painted), painted
    assert not any(p.startswith("DONE") for p in painted[:-1] if "in 6 rounds" not in p), painted


async def test_ctrl_c_aborts_a_run_in_flight_and_exits_130(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=300.0, latency_sigma=0.0)
    session = open_session(tmp_path, sim.base_url, [f"task {i}" for i in range(30)], concurrency=3)
    app = make_app(session, config=Config(path=tmp_path / "config.toml"))
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: session.engine.stats.sent >= 3, what="the first calls")
            await pilot.press("ctrl+c")
            await wait_for(pilot, lambda: not app.is_running, what="ctrl+c to end the app")
        assert app.return_value == 130
        assert session.engine.aborted and not session.engine.running
        assert not any("to quit the app" in n.message for n in app._notifications), "Textual's notice"
    finally:
        await session.aclose()


async def test_the_footer_and_the_panel_agree_on_what_p_does(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=200.0, latency_sigma=0.0)
    session = open_session(tmp_path, sim.base_url, [f"task {i}" for i in range(40)], concurrency=4)
    app = make_app(session, config=Config(path=tmp_path / "config.toml"))
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: session.engine.stats.sent >= 4)
            await wait_for(pilot, lambda: "p Pause" in footer_labels(app), what="p Pause while it runs")
            await pilot.press("p")
            await wait_for(
                pilot,
                lambda: app.phase == "PAUSED" and "p Resume" in footer_labels(app),
                what="the footer to say p resumes, as the panel does",
            )
            assert "p resumes" in panel_text(app)
            await pilot.press("p")
            await wait_for(pilot, lambda: app.phase == "RUNNING" and "p Pause" in footer_labels(app))
            session.engine.abort("test: stop")
            await wait_for(pilot, lambda: app.phase == "ABORTED", what="the abort")
            await wait_for(pilot, lambda: "p Resume" in footer_labels(app), what="p resumes what the abort left")
            await wait_for(pilot, lambda: run_over(app), what="the run's outputs written")
    finally:
        await session.aclose()


async def test_figures_after_the_end_are_the_runs_average_not_its_last_seconds(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=30.0, latency_sigma=0.0)
    now = [1000.0]
    session = open_session(tmp_path, sim.base_url, [f"task {i}" for i in range(20)], concurrency=2)
    session.engine.subscribe(lambda e: now.__setitem__(0, now[0] + 0.5))  # every event: half a second
    app = make_app(session, config=Config(path=tmp_path / "config.toml"), clock=lambda: now[0])
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.phase == "DONE", what="the run to end")
            await pilot.pause(0.2)
            stats = app.source.stats
            req_s, _ = average_rates(stats, app.layout.ended_elapsed_s or 0.0)
            assert f"{req_s:6.1f} req/s" in app.figures.text.plain, app.figures.text.plain
            recent, _ = stats.rates()
            assert abs(recent - req_s) > 0.05, "the recent rate would read otherwise"
            now[0] += 3600  # an hour later
            app.painter._last_second = float("-inf")
            app.drain()
            app.update_panels()
            assert f"{req_s:6.1f} req/s" in app.figures.text.plain, "not frozen, not decaying: the average"
            assert "ETA --:--" in app.figures.text.plain
            await wait_for(pilot, lambda: run_over(app), what="the run's outputs written")
    finally:
        await session.aclose()


async def test_after_a_resume_the_eta_is_this_sessions_pace(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=100.0, latency_sigma=0.0)
    session = open_session(tmp_path, sim.base_url, [f"task {i}" for i in range(40)], concurrency=2, adaptive=False)
    session.engine.subscribe(
        lambda e: session.engine.abort("test: stop early") if session.engine.stats.succeeded >= 20 else None
    )
    try:
        await session.run()
    finally:
        await session.aclose()
    import sqlite3

    db = sqlite3.connect(tmp_path / "run" / "journal.sqlite")
    with db:  # the first session ran a day ago
        db.execute("UPDATE log SET at = at - 86400")
    db.close()
    resumed = SwarmSession.reopen(tmp_path / "run")
    app = make_app(resumed, config=Config(path=tmp_path / "config.toml"))
    etas: list[float] = []
    try:
        async with app.run_test(size=(80, 24)) as pilot:

            def sample() -> bool:
                eta = app.source.eta_s()
                if eta is not None and resumed.engine.stats.succeeded < 36:
                    etas.append(eta)
                return app.phase == "DONE"

            await wait_for(pilot, sample, timeout=30, what="the resumed run to end")
            await wait_for(pilot, lambda: run_over(app), what="the run's outputs written")
    finally:
        await resumed.aclose()
    assert etas, "an ETA while the resumed session ran"
    assert max(etas) < 60, f"ETA at this session's pace (20 tasks at ~20/s), not a day's: {max(etas):.0f}s"


async def test_a_running_agents_detail_shows_its_attempt_in_flight_and_deadlines(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=5000.0, latency_sigma=0.0)  # long enough to see the clock move on a busy machine
    session = open_session(tmp_path, sim.base_url, [f"task {i}" for i in range(4)], concurrency=4, timeout_s=30)
    app = make_app(session, config=Config(path=tmp_path / "config.toml"))
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(
                pilot, lambda: session.engine.states[1] is TaskState.RUNNING and 1 in app.view.agents.in_flight
            )
            app.open_agent(1)
            await wait_for(
                pilot,
                lambda: isinstance(app.screen, AgentDetailScreen) and app.screen.query("#detail-in-flight"),
                what="the detail to open",
            )
            detail = app.screen
            await pilot.pause()
            title = str(detail.query_one("#detail-title").content)
            assert "RUNNING · attempt 1 in flight · 0 attempts done" in title, title
            line = str(detail.query_one("#detail-in-flight").content)
            assert line.startswith("attempt 1 in flight on custom: ") and "hard timeout 30s" in line, line
            first = float(re.search(r": ([\d.]+)s so far", line).group(1))
            await wait_for(
                pilot,
                lambda: (
                    float(re.search(r": ([\d.]+)s so far", str(detail.query_one("#detail-in-flight").content)).group(1))
                    > first
                ),
                what="the elapsed time to tick",
            )
            await wait_for(pilot, lambda: session.engine.states[1] is TaskState.SUCCEEDED, what="the answer")
            await wait_for(pilot, lambda: not detail.query_one("#detail-in-flight").display, what="nothing in flight")
            assert "DONE · 1 attempt done" in str(detail.query_one("#detail-title").content)
            await wait_for(pilot, lambda: run_over(app), timeout=30, what="the run's outputs written")
    finally:
        await session.aclose()


async def test_the_bell_rings_on_finish_only_when_asked(tmp_path, sim):
    rung = []
    for bell in (False, True):
        session = open_session(tmp_path, sim.base_url, ["a", "b"], run_name=f"run-{bell}")
        app = make_app(session, config=Config(path=tmp_path / "config.toml"), bell=bell)
        app.bell = lambda bell=bell: rung.append(bell)  # type: ignore[method-assign]
        try:
            async with app.run_test(size=(80, 24)) as pilot:
                await wait_for(
                    pilot, lambda app=app: any(n.message.startswith("Run finished") for n in app._notifications)
                )
        finally:
            await session.aclose()
    assert rung == [True]


async def test_a_planner_error_shows_in_the_error_log_named_by_its_step(tmp_path, sim):
    path = tmp_path / "planned.toml"
    path.write_text(
        'name = "planned"\nmodel = "sim-1"\ngoal = "plan it [[sim:500x1]]"\n'
        '[plan]\nagents = 3\n[workers]\nprompt = "do {subtask}"\n'
    )
    job = load_job(path)
    session = SwarmSession.open_new(
        job, RunPlan(ProviderProfile("custom", base_url=sim.base_url), EngineSettings()), tmp_path / "run"
    )
    app = make_app(session, config=Config(path=tmp_path / "config.toml"))
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.phase == "DONE", timeout=20, what="the planned swarm to end")
            log = app.query_one(ErrorLog)
            rows = [[str(c) for c in log.get_row_at(i)] for i in range(log.row_count)]
            assert any(row[1] == "plann" and row[2] == "server_error" and row[4] == "retrying" for row in rows), rows
            log.focus()
            log.move_cursor(row=0)
            await pilot.press("enter")
            await wait_for(
                pilot,
                lambda: any(n.title == "Step error" for n in app._notifications),
                what="enter on the planner's row to show its failure in full",
            )
            assert not isinstance(app.screen, AgentDetailScreen)
            await wait_for(pilot, lambda: run_over(app), what="the run's outputs written")
    finally:
        await session.aclose()


async def test_tools_starting_say_so(tmp_path, sim):
    from swarm_tui.tools.spec import PythonToolSpec, ToolsSpec

    from tests.test_agents import agents_job

    tools = ToolsSpec(python=(PythonToolSpec("tests.agent_tools:add", where="tools.python[0]"),), source="job.toml")
    job = agents_job(tmp_path, ["agent 0 [[sim:tools=1]]"], tools)
    session = SwarmSession.open_new(
        job, RunPlan(ProviderProfile("custom", base_url=sim.base_url), EngineSettings()), tmp_path / "run"
    )
    app = make_app(session, config=Config(path=tmp_path / "config.toml"), start=False)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            app.lifecycle.start()
            assert app.phase == "STARTING" and "starting the job's tools" in app.phase_detail
            await wait_for(pilot, lambda: app.phase == "DONE", timeout=20, what="the agent to end")
            await wait_for(pilot, lambda: run_over(app), what="the run's outputs written")
    finally:
        await session.aclose()


def test_the_phase_view_says_a_single_run_done_with_its_count():
    view = PhaseView()
    assert view.finish(RunFinished(10, 2, 0, False)) and (view.phase, view.detail) == ("FINISHED", "10 done, 2 failed")


async def test_an_attached_view_says_detach_and_resumes_a_dead_run_in_the_background(tmp_path, sim_factory):
    import io

    from swarm_tui.frontend.attached import AttachedRun
    from swarm_tui.ui.launch import say_detached
    from swarm_tui.ui.screens.dialogs import ConfirmScreen

    sim = sim_factory(latency_ms=40.0, latency_sigma=0.0)
    session = open_session(tmp_path, sim.base_url, [f"task {i}" for i in range(30)], concurrency=2, adaptive=False)
    session.engine.subscribe(
        lambda e: session.engine.abort("test: the writer stops") if session.engine.stats.succeeded >= 6 else None
    )
    try:
        await session.run()
    finally:
        await session.aclose()
    source = AttachedRun(tmp_path / "run")
    app = make_app(source, config=Config(path=tmp_path / "config.toml"))
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: source.stats.succeeded >= 6, what="the journal replayed")
            await wait_for(
                pilot,
                lambda: "q Detach" in footer_labels(app) and "p Resume" in footer_labels(app),
                what="the footer to say q detaches and p resumes",
            )
            assert "p: resume it here, in the background" in panel_text(app)
            out = io.StringIO()
            say_detached(source, out)
            assert out.getvalue().endswith(f"Go on with: swarm-tui resume {tmp_path / 'run'}\n"), out.getvalue()
            await pilot.press("p")
            await wait_for(pilot, on_top(app, ConfirmScreen), what="p to offer the resume")
            await pilot.press("y")
            await wait_for(
                pilot,
                lambda: source.stats.succeeded == 30,
                timeout=60,
                what="the background resume to finish the run, seen from this view",
            )
            log = (tmp_path / "run" / "resume.log").read_text()
            assert "30/30 succeeded" in log, log
            source.resumer.wait(timeout=30)
            out = io.StringIO()
            say_detached(source, out)
            assert "the run has ended (30 done, 0 failed)" in out.getvalue()
    finally:
        if source.resumer is not None and source.resumer.poll() is None:
            source.resumer.kill()
        await source.aclose()


async def test_detaching_from_a_live_run_says_how_to_come_back(tmp_path, sim_factory):
    import asyncio
    import io

    from swarm_tui.frontend.attached import AttachedRun
    from swarm_tui.ui.launch import say_detached

    sim = sim_factory(latency_ms=150.0, latency_sigma=0.0)
    session = open_session(tmp_path, sim.base_url, [f"task {i}" for i in range(100)], concurrency=2)
    runner = asyncio.create_task(session.run())
    source = AttachedRun(tmp_path / "run")
    app = make_app(source, config=Config(path=tmp_path / "config.toml"))
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: source.live and source.stats.succeeded >= 2, what="a live run followed")
            await wait_for(pilot, lambda: "q Detach" in footer_labels(app), what="q says Detach")
            await pilot.press("q")
            await wait_for(pilot, lambda: not app.is_running, what="q to leave at once")
        out = io.StringIO()
        say_detached(source, out)
        assert f"Come back with: swarm-tui attach {tmp_path / 'run'}" in out.getvalue(), out.getvalue()
        assert session.engine.running, "detaching never stops the run"
    finally:
        session.engine.abort()
        await runner
        await session.aclose()
        await source.aclose()


async def test_q_while_the_outputs_are_written_waits_for_them_then_quits(tmp_path, sim):
    import threading

    session = open_session(tmp_path, sim.base_url, [f"task {i}" for i in range(5)])
    writing, release = threading.Event(), threading.Event()
    finalize = session.finalize

    def slow_finalize():  # results.jsonl of a big run takes seconds: here, until the test says
        writing.set()
        release.wait(30)
        return finalize()

    session.finalize = slow_finalize  # type: ignore[method-assign]
    app = make_app(session, config=Config(path=tmp_path / "config.toml"))
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: writing.is_set() and not session.engine.running, what="the outputs begun")
            await pilot.press("q")
            await wait_for(
                pilot,
                lambda: any(n.message.startswith("Writing results.jsonl") for n in app._notifications),
                what="q to say it waits for the outputs",
            )
            assert app.is_running, "q left while the journal was still being read"
            release.set()
            await wait_for(pilot, lambda: not app.is_running, what="the app to quit once they are written")
        assert app.return_value == 0
        assert (tmp_path / "run" / "summary.json").exists()
    finally:
        release.set()
        await session.aclose()


async def test_a_drain_while_the_app_shuts_down_paints_nothing(tmp_path, sim):
    """The drain's timer can tick once more after the screen's widgets are pruned (CI saw it:
    a KeyError for the provider bar's component style, which Textual clears on removal)."""
    session = open_session(tmp_path, sim.base_url, [f"task {i}" for i in range(3)])
    app = make_app(session, config=Config(path=tmp_path / "config.toml"))
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: session.summary is not None, what="the run to end")
            await pilot.press("q")
        assert not app.provider_bar.is_attached, "the widgets were pruned"
        app.update_panels()  # a paint owed when the timer fired: no widget left to paint
        app.drain()
    finally:
        await session.aclose()
