"""Snapshots (pytest-textual-snapshot) of the main screen, an agent's detail and the help,
at 80x24 and 120x40.

Deterministic by construction: the screen is built on a recorded run (`scripted_run`: the events
of a seeded simulator run, their timings fixed when recorded), replayed into the console's view
with no engine, no HTTP and no journal; the clock is frozen and the timezone is UTC. Update after
a deliberate change with `pytest --snapshot-update`.

The fixtures (`app_on_run`, and `finished_run` — that run for real, a journal on disk, for the
tests that attach to one) are in `ui_fixtures.py`, given to every test by conftest.py.
"""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_main_screen(snap_compare, app_on_run, size):
    assert snap_compare(app_on_run(), terminal_size=size)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_agent_detail_of_a_failed_agent(snap_compare, app_on_run, size):
    async def open_agent_13(pilot):
        pilot.app.open_agent(12)
        await pilot.pause(0.2)

    assert snap_compare(app_on_run(), terminal_size=size, run_before=open_agent_13)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_help(snap_compare, app_on_run, size):
    assert snap_compare(app_on_run(), terminal_size=size, press=["question_mark", "_"])


def test_high_contrast_heat_view_with_cursor(snap_compare, app_on_run):
    assert snap_compare(
        app_on_run(theme="swarm-high-contrast"), terminal_size=(80, 24), press=["down", "down", "right", "h", "_"]
    )
