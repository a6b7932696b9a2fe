"""A routed run in the console ("the run panel gains one compact row per
endpoint (in flight / limit, rpm, p95, errors, cost), live and attached alike"; the detail view
says which door served what; failover events name from and to).

Driven as a user would (Pilot) on real routed runs over loopback: two or three simulators, each a
door of a `SwarmSession` opened with a `RunPlan(..., route=RoutePlan(...))`, at 80x24; then the same
run attached to (`AttachedRun`: the journal's log replayed through the same view), which paints the
same rows. The rows' figures are checked against summary.json's `endpoints` (the journal's), so
the console and the files tell one truth."""

from __future__ import annotations

import asyncio
import json

from rich.style import Style
from swarm_tui.config import Config
from swarm_tui.core.call_errors import CallError, ErrorClass
from swarm_tui.core.events import (
    Attempt,
    AttemptStarted,
    ConcurrencyChanged,
    EndpointSwitched,
    RateLimitsLearned,
    TaskRetrying,
    TaskSucceeded,
)
from swarm_tui.engine import EngineSettings
from swarm_tui.engine.stats import nearest_rank
from swarm_tui.frontend.attached import AttachedRun
from swarm_tui.jobs import load_job
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.providers.routes import RoutePlan
from swarm_tui.run.session import RunPlan, SwarmSession
from swarm_tui.ui.app import SwarmApp, make_app
from swarm_tui.ui.screens.detail import AgentDetailScreen
from swarm_tui.ui.widgets.errorlog.error_log import ErrorLog
from swarm_tui.ui.widgets.panels.endpoint_rows import OPEN_GLYPH, endpoint_lines
from swarm_tui.ui.widgets.panels.run_panel import RunPanel
from swarm_tui.view.news import narrate
from swarm_tui.view.run_view import RunView
from textual.widgets import Static

from tests.conftest import write_batch
from tests.helpers import attempts_of
from tests.test_ui_agent_cells import panel_text
from tests.test_ui_app import wait_for as ui_wait_for

MODEL = "sim-1"
PRICES = {"a/sim-1": {"input": 2.0, "output": 8.0}, "b/sim-1": {"input": 1.0, "output": 4.0}}
PRICES |= {"c/sim-1": {"input": 0.5, "output": 2.0}}


def routed_session(tmp_path, sims, prompts, strategy: str, *, run_name: str = "run", **settings) -> SwarmSession:
    """A session whose doors are the simulators, named a, b, c... in order, routed by `strategy`."""
    job = load_job(write_batch(tmp_path / f"{run_name}.jsonl", prompts))
    profiles = [
        ProviderProfile(name=name, base_url=sim.base_url, model=MODEL) for name, sim in zip("abc", sims, strict=False)
    ]
    route = RoutePlan(tuple(profiles[1:]), strategy)
    plan = RunPlan(profiles[0], EngineSettings.of(**settings), prices=PRICES, route=route)
    return SwarmSession.open_new(job, plan, tmp_path / run_name)


def app_for(source, tmp_path) -> SwarmApp:
    return make_app(source, config=Config(path=tmp_path / "config.toml"))


async def wait_for(pilot, condition, what: str) -> None:
    await ui_wait_for(pilot, condition, timeout=30, what=what)


def endpoint_rows(app: SwarmApp) -> list[str]:
    """The panel's endpoint header and rows as painted (from the header down to the last door's)."""
    lines = panel_text(app).splitlines()
    start = next((n for n, line in enumerate(lines) if line.lstrip().startswith("door ")), None)
    if start is None:
        return []
    rows = [lines[start]]
    for line in lines[start + 1 :]:
        if not line.strip() or line.split()[0].rstrip(OPEN_GLYPH) not in "abc":
            break
        rows.append(line)
    return rows


def summary_endpoints(run_dir) -> dict:
    return json.loads((run_dir / "summary.json").read_text())["endpoints"]


def assert_rows_tell_the_summary(app: SwarmApp, run_dir) -> None:
    """The view's figures of each door are summary.json's (the journal's), and its p95 the
    journal's latencies' (nearest rank, as the run's own p95)."""
    doors = app.source.view.endpoints.doors
    summary = summary_endpoints(run_dir)
    assert set(summary) <= set(doors), (set(doors), summary)
    latencies: dict[str, list[float]] = {name: [] for name in doors}
    for index in range(len(app.source.tasks)):
        for row in attempts_of(run_dir, index):
            assert row["endpoint"] in doors, row
            if row["outcome"] == "ok":
                latencies[row["endpoint"]].append(row["latency_ms"])
    for name, door in doors.items():
        told = summary.get(name, {"requests": 0, "answered": 0, "rate_limited": 0, "errors": 0, "cost_usd": 0.0})
        assert door.p95_ms == nearest_rank(sorted(latencies[name]), 0.95), name
        assert (door.requests, door.answered, door.rate_limited, door.errors) == (
            told["requests"],
            told["answered"],
            told["rate_limited"],
            told["errors"],
        ), name
        assert abs(door.cost_usd - told["cost_usd"]) < 1e-6 and door.cost_known, name
        assert door.in_flight == 0, f"{name}: every call that started ended"


def painted_row(rows: list[str], name: str) -> list[str]:
    return next(line.split() for line in rows[1:] if line.split()[0].rstrip(OPEN_GLYPH) == name)


async def test_a_balanced_run_shows_a_row_per_endpoint_live_and_attached_at_80x24(tmp_path, sim_factory):
    sims = [sim_factory(latency_ms=40, latency_sigma=0.2, rpm=6000) for _ in range(3)]
    prompts = [f"routed in the console {i}" for i in range(90)]
    session = routed_session(tmp_path, sims, prompts, "balance", concurrency=6)
    app = app_for(session, tmp_path)
    flying: list[tuple[int, int]] = []
    view = app.source.view  # (its listener is the engine's first: this one sees the view as it moved)
    session.engine.subscribe(
        lambda event: flying.append((sum(d.in_flight for d in view.endpoints.doors.values()), view.stats.in_flight))
    )
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(
                pilot,
                lambda: session.summary is not None and len(endpoint_rows(app)) == 4,
                what="the run to end with a row per door",
            )
            assert max(at_doors for at_doors, _ in flying) > 0, "calls were seen in flight at their doors"
            assert all(at_doors == in_flight for at_doors, in_flight in flying), (
                "the doors' in flight add up to the run's"
            )
            assert_rows_tell_the_summary(app, tmp_path / "run")
            rows = endpoint_rows(app)
            panel = app.query_one(RunPanel)
            assert all(len(line.rstrip()) <= panel.content_size.width for line in rows)
            assert not any(line.rstrip().endswith("…") for line in rows), "columns go before a row is cut"
            assert rows[0].split()[:3] == ["door", "in/lim", "rpm"], rows
            doors = view.endpoints.doors
            for name in "abc":
                cells = painted_row(rows, name)
                door = doors[name]
                assert cells[1] == f"0/{door.limit}", (name, cells)
                assert door.answered >= 1 and door.rpm_limit == 6000, name
            assert sum(d.answered for d in doors.values()) == len(prompts)
            assert panel_text(app).count("door ") == 1
            live_rows = rows
            await pilot.resize_terminal(60, 20)  # no room for the rows: no header left alone either
            await wait_for(
                pilot,
                lambda: app.query_one(RunPanel).content_size.width < 36 and " done " in panel_text(app),
                what="the panel to be laid out at 60x20",
            )
            assert endpoint_rows(app) == [] and "door" not in panel_text(app), panel_text(app)
            await pilot.resize_terminal(120, 40)  # room again: every column
            every_column = ["door", "in/lim", "rpm/lim", "p95", "429", "err", "cost"]
            await wait_for(
                pilot,
                lambda: len(endpoint_rows(app)) == 4 and endpoint_rows(app)[0].split() == every_column,
                what="the rows with every column at 120x40",
            )
            assert "rpm 18.0k" in panel_text(app), "the route's RPM: its three doors' 6,000 added up"
            await pilot.resize_terminal(80, 24)
            await wait_for(pilot, lambda: endpoint_rows(app) == live_rows, what="the rows at 80x24 again")
            await pilot.press("q")
    finally:
        await session.aclose()

    attached = AttachedRun(tmp_path / "run")  # the same run, from its journal: the same rows
    app = app_for(attached, tmp_path)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(
                pilot,
                lambda: attached.follower.finished is not None and endpoint_rows(app) == live_rows,
                what="the attached view to paint the live view's endpoint rows",
            )
            assert_rows_tell_the_summary(app, tmp_path / "run")
    finally:
        await attached.aclose()


async def test_an_attached_view_of_a_routed_run_in_flight_paints_its_doors_at_work(tmp_path, sim_factory):
    """Attached while another driver runs the route (here a session in this process: the view
    reads only its journal): the rows show calls in flight at the doors and their answers of
    the last minute as they come, then, once the run is over, what summary.json says."""
    sims = [sim_factory(latency_ms=150, latency_sigma=0.0) for _ in range(2)]
    prompts = [f"watched at its doors {i}" for i in range(240)]
    session = routed_session(tmp_path, sims, prompts, "balance", concurrency=3)
    runner = asyncio.create_task(session.run())
    attached = AttachedRun(tmp_path / "run")
    app = app_for(attached, tmp_path)
    try:
        async with app.run_test(size=(80, 24)) as pilot:

            def at_work() -> bool:
                rows = endpoint_rows(app)
                if len(rows) != 3 or not attached.live:
                    return False
                cells = [painted_row(rows, name) for name in "ab"]
                return any(not c[1].startswith("0/") for c in cells) and all(int(c[2]) > 0 for c in cells)

            await wait_for(pilot, at_work, what="the attached rows to show calls in flight and answers coming")
            await asyncio.wait_for(runner, 60)
            await wait_for(
                pilot,
                lambda: (
                    attached.follower.finished is not None
                    and all(painted_row(endpoint_rows(app), n)[1].startswith("0/") for n in "ab")
                ),
                what="the attached view to see the run end",
            )
            assert_rows_tell_the_summary(app, tmp_path / "run")
            await pilot.press("q")
    finally:
        if not runner.done():
            session.engine.abort()
            await runner
        await session.aclose()
        await attached.aclose()


async def test_a_chain_whose_first_door_is_down_names_the_switch_and_each_attempts_door(tmp_path, sim_factory):
    """A fallback chain of three whose first door answers only 503: the switch is announced from
    a to b, a's row is marked open with its errors, the error log says which door failed each
    attempt, and an agent's detail says the door of each attempt."""
    sims = [sim_factory(down=True), sim_factory(latency_ms=5), sim_factory(latency_ms=5)]
    prompts = [f"chained in the console {i}" for i in range(40)]
    session = routed_session(tmp_path, sims, prompts, "fallback", concurrency=4)
    app = app_for(session, tmp_path)
    alerts: list[str] = []
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            real_alert = app.painter.alert
            app.painter.alert = lambda message, title, timeout=8: (
                alerts.append(message),
                real_alert(message, title, timeout),
            )
            await wait_for(pilot, lambda: session.summary is not None, what="the run to end")
            await wait_for(pilot, lambda: len(endpoint_rows(app)) == 4, what="a row per door")
            assert any(m.startswith("New attempts go from a to b: ") for m in alerts), alerts
            doors = app.source.view.endpoints.doors
            assert doors["a"].open and not doors["b"].open and doors["a"].answered == 0
            assert doors["b"].answered + doors["c"].answered == len(prompts)
            assert_rows_tell_the_summary(app, tmp_path / "run")
            cells = painted_row(endpoint_rows(app), "a")
            assert cells[0] == f"a{OPEN_GLYPH}" and int(cells[-1 if not cells[-1].startswith("$") else -2]) > 0, cells
            log = app.query_one(ErrorLog)
            messages = [log.get_row_at(n)[-1].plain for n in range(log.row_count)]
            assert messages and all(m.startswith("a: ") for m in messages), messages
            failed_first = next(i for i in range(len(prompts)) if len(attempts_of(tmp_path / "run", i)) > 1)
            app.grid.focus()
            app.grid.move_to(failed_first)
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, AgentDetailScreen), what="the detail to open")
            shown = str(app.screen.query_one("#detail-attempts", Static).content)
            endpoints = [row["endpoint"] for row in attempts_of(tmp_path / "run", failed_first)]
            assert endpoints[0] == "a" and endpoints[-1] == "b", endpoints
            assert [line.strip() for line in shown.splitlines() if line.strip().startswith("on ")] == [
                f"on {e}" for e in endpoints
            ], shown
            await pilot.press("q")
    finally:
        await session.aclose()


def test_a_run_of_one_endpoint_has_no_endpoint_rows():
    """Only the doors a routed run announces have rows: a single endpoint's attempts add none,
    and its rate limits stay the run-wide line's."""
    view = RunView(range(2))
    view.observe(RateLimitsLearned(600, 90_000))
    view.observe(AttemptStarted(0, 1, "custom"))
    view.observe(TaskSucceeded(Attempt(0, 1, "custom", 1.0, 120.0, "ok", status=200, cost_usd=0.01), "x"))
    assert not view.endpoints.routed and view.endpoints.doors == {}
    assert endpoint_lines(view.endpoints, None, 40, dim=Style(), bad=Style()) == []
    assert view.figures.rate_limits == (600, 90_000)


def door_view() -> RunView:
    """Two doors, one with a long name, with answers, a 429, a 5xx, costs and a learned RPM."""
    view = RunView(range(4))
    for name, limit in (("official-openai", 12), ("relay", 4)):
        view.observe(ConcurrencyChanged(16, "start", endpoint=name, endpoint_limit=limit))
    view.observe(RateLimitsLearned(3000, 150_000, endpoint="official-openai"))
    limited = CallError(ErrorClass.RATE_LIMIT, "slow down", status=429)
    broken = CallError(ErrorClass.SERVER, "bad gateway", status=502)
    for index, endpoint, error in ((0, "relay", limited), (1, "relay", broken)):
        view.observe(AttemptStarted(index, 1, endpoint))
        view.observe(TaskRetrying(Attempt(index, 1, endpoint, 1.0, 50.0, "retry", error=error, cost_usd=0.0), 0.1))
    for index in range(3):
        view.observe(AttemptStarted(index, 2, "official-openai"))
    for index in range(2):
        answer = Attempt(index, 2, "official-openai", 1.0, 200.0 + index, "ok", status=200, cost_usd=0.25)
        view.observe(TaskSucceeded(answer, "x"), at=1000.0 + index)
    view.observe(EndpointSwitched("official-openai", "relay failed 3 attempts in a row", source="relay"))
    return view


def test_the_rows_drop_columns_before_they_wrap_and_say_what_the_view_counted():
    view = door_view()
    doors = view.endpoints
    assert doors.routed and list(doors.doors) == ["official-openai", "relay"]
    assert doors.summed_limits() == (None, None), "a door's RPM unknown: the route's is not known either"
    official, relay = doors.doors["official-openai"], doors.doors["relay"]
    assert (official.in_flight, official.limit, official.answered, official.p95_ms) == (1, 12, 2, 201.0)
    assert (relay.in_flight, relay.requests, relay.rate_limited, relay.errors, relay.open) == (0, 2, 1, 1, True)
    wide = [line.plain for line in endpoint_lines(doors, 1030.0, 80, dim=Style(), bad=Style())]
    assert wide[0].split() == ["door", "in/lim", "rpm/lim", "p95", "429", "err", "cost"]
    assert wide[1].split() == ["official-…", "1/12", "2/3.0k", "201ms", "0", "0", "$0.5000"]
    assert wide[2].split() == [f"relay{OPEN_GLYPH}", "0/4", "0/-", "-", "1", "1", "$0.0000"]
    later = [line.plain for line in endpoint_lines(doors, 1061.5, 80, dim=Style(), bad=Style())]
    assert later[1].split()[2] == "0/3.0k", "an answer older than a minute is out of the rate"
    seen: list[list[str]] = []
    for width in range(60, 7, -1):
        lines = [line.plain for line in endpoint_lines(doors, 1030.0, width, dim=Style(), bad=Style())]
        assert all(len(line) <= width for line in lines), (width, lines)
        assert len(lines) == 3
        header = lines[0].split()
        if not seen or seen[-1] != header:
            seen.append(header)
    columns = [tuple(h[1:]) for h in seen]
    assert columns[0] == ("in/lim", "rpm/lim", "p95", "429", "err", "cost")
    assert ("in/lim", "rpm", "p95", "err", "cost") in columns and ("in/lim", "err") in columns
    assert columns[-1] == ("in/lim",), "the name and what is in flight stay to the last"
    narrow = [line.plain for line in endpoint_lines(doors, 1030.0, 20, dim=Style(), bad=Style())]
    assert narrow[2].split()[-1] == "2", "without a 429 column the errors count the 429s"


def test_failover_news_names_the_door_it_left_and_the_one_it_went_to():
    away = narrate(EndpointSwitched("b", "a failed 5 attempts in a row", source="a"), None)
    back = narrate(EndpointSwitched("a", "a answered the probe: back to a", source="a"), None)
    old = narrate(EndpointSwitched("fallback", "5xx above 1%"), None)
    assert away is not None and away.text == "new attempts go from a to b: a failed 5 attempts in a row"
    assert away.fields["source"] == "a" and away.fields["endpoint"] == "b"
    assert back is not None and back.text == "new attempts go to a again: a answered the probe: back to a"
    assert old is not None and old.text == "new attempts go to fallback: 5xx above 1%"
    view = RunView(range(1))
    view.observe(EndpointSwitched("b", "a failed", source="a"))
    assert view.phases.detail == "now sending to b (from a): a failed"


def test_a_resumed_runs_earlier_sessions_count_in_the_totals_not_in_flight_or_the_last_minute():
    """A resumed run shows its earlier sessions through `RunView.replay`: their attempts count in
    each door's totals, but a call they left in flight and their answers are not this session's
    (as the run's own counts forget their recent rates)."""
    view = RunView(range(4))
    earlier = [
        ConcurrencyChanged(16, "start", endpoint="a", endpoint_limit=8),
        ConcurrencyChanged(16, "start", endpoint="b", endpoint_limit=8),
        AttemptStarted(0, 1, "a"),
        AttemptStarted(1, 1, "b"),
        TaskSucceeded(Attempt(0, 1, "a", 1.0, 90.0, "ok", status=200, cost_usd=0.5), "x"),
    ]
    view.replay((None, event) for event in earlier)
    a, b = view.endpoints.doors["a"], view.endpoints.doors["b"]
    assert (a.requests, a.answered, a.cost_usd, a.p95_ms) == (1, 1, 0.5, 90.0)
    assert (a.in_flight, b.in_flight) == (0, 0), "the call left in flight was the earlier session's"
    assert [rpm for _, rpm in view.endpoints.rows()] == [0, 0], "its answers are not this session's minute"
