"""The console's "in flight" figure against its limit: never a fraction past 1.

Two states put more calls on the wire than the in-flight limit, both legitimate: a hedged backup
(a call that holds no slot: the calls pass the limit by the backups alone) and a limit lowered
below the calls already out (AIMD, or the user's `-`: they finish, nothing new goes out until under
it). The footer counts the tasks holding a slot against the limit and shows the backups beside
them; a lowered limit is said as what it is, in the footer and the run panel. Each test drives the
real console (Textual's Pilot) over a real simulator on loopback, painting its panels at every
event of the run, as its 4 Hz drain may at any of them."""

from __future__ import annotations

import re

from swarm_tui.config import Config
from swarm_tui.ui.app import make_app
from swarm_tui.ui.widgets.footer.stats_footer import StatsFigures
from swarm_tui.ui.widgets.panels.run_panel import RunPanel

from tests.helpers import open_session
from tests.test_ui_app import wait_for

FIGURE = re.compile(r"in flight\s+(\d+)([/>])(\d+)(↓?)(?:\+(\d+))?")
"""The footer's figure: the tasks in flight, `/` or `>` (a lowered limit, `↓`), the limit, the backups."""


def painted(app) -> str:
    """The footer as the console paints it now."""
    app.layout.update()
    return app.query_one(StatsFigures).text.plain


def figure(text: str) -> tuple[int, str, int, int]:
    """The footer's in-flight figure: (tasks, sign, limit, backups)."""
    found = FIGURE.search(text)
    assert found is not None, text
    tasks, sign, limit, _, backups = found.groups()
    return int(tasks), sign, int(limit), int(backups or 0)


async def test_a_hedged_backup_holds_no_slot_and_the_figure_never_passes_the_limit(tmp_path, sim_factory):
    limit = 6
    sim = sim_factory(latency_ms=30.0, latency_sigma=0.2)
    prompts = [f"task {i}" for i in range(200)]
    for i in (60, 61, 62):  # hung while the queue is long: a backup goes out with every slot taken
        prompts[i] = f"hangs {i} [[sim:hangx1]]"
    session = open_session(
        tmp_path, sim.base_url, prompts, concurrency=limit, adaptive=False, hedge=True, timeout_s=60.0
    )
    board = session.engine.board
    app = make_app(session, config=Config(path=tmp_path / "config.toml"))
    painted_at_events: list[tuple[str, int, int]] = []
    async with app.run_test(size=(100, 30)) as pilot:
        app.source.subscribe(
            lambda event: painted_at_events.append((painted(app), board.live_tasks, len(board.backups)))
        )
        await wait_for(pilot, lambda: app.phase == "DONE", timeout=90, what="the run to end")
    assert session.engine.stats.succeeded == 200
    shown = [(figure(text), tasks, backups) for text, tasks, backups in painted_at_events]
    wrong = [seen for seen in shown if seen[0][1] == "/" and seen[0][0] > seen[0][2]]
    assert not wrong, f"the footer showed more in flight than the limit, as a fraction: {wrong[:3]}"
    assert all(seen[0][0] == seen[1] and seen[0][3] == seen[2] for seen in shown), [
        seen for seen in shown if seen[0][0] != seen[1] or seen[0][3] != seen[2]
    ][:3]
    full = [seen for seen in shown if seen[1] == limit and seen[2] >= 1]
    assert full, "no backup ran while every slot was taken (else the figure was not tested)"
    assert all(seen[0] == (limit, "/", limit, seen[2]) for seen in full), full[:3]


async def test_a_limit_lowered_below_the_calls_out_is_said_as_such(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=3000.0, latency_sigma=0.0)
    session = open_session(
        tmp_path, sim.base_url, [f"slow {i}" for i in range(8)], concurrency=8, adaptive=False, rpm=60_000
    )
    board = session.engine.board
    app = make_app(session, config=Config(path=tmp_path / "config.toml"))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: board.live_tasks == 8, timeout=20, what="8 calls in flight")
        await pilot.press("minus")  # the user lowers the limit while its 8 calls are out (3 s each)
        assert session.engine.admission.limit == 7 and board.live_tasks == 8
        footer = painted(app)
        assert figure(footer) == (8, ">", 7, 0), footer
        panel = app.query_one(RunPanel).text.plain
        assert "limit 7 (8 in flight, lowered)" in panel, panel
        await wait_for(pilot, lambda: app.phase == "DONE", timeout=30, what="the run to end")
        assert figure(painted(app))[:3] == (0, "/", 7)
