"""The error log as a place to triage from: its rows say what became of each agent
(after a resume too), a countdown that fits its column, a filter by error class, repeats grouped,
and what a retry costs, said before it is sent. On the snapshot fixture's run: a resumed
session's screen, nothing started."""

from __future__ import annotations

from swarm_tui.engine import TaskState
from swarm_tui.ui.widgets.errorlog.error_log import COLUMNS, ErrorLog, retry_countdown

from tests.test_ui_app import wait_for


def rows(log: ErrorLog) -> list[list[str]]:
    return [[cell.plain for cell in log.get_row_at(i)] for i in range(log.row_count)]


async def test_after_a_resume_the_log_says_what_became_of_each_agent(app_on_run):
    app = app_on_run()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        log = app.query_one(ErrorLog)
        states = app.source.states
        shown = rows(log)
        assert shown, "the earlier session's failures"
        for row in shown:
            agent, state = int(row[1].lstrip("#")) - 1, states[int(row[1].lstrip("#")) - 1]
            if state is TaskState.SUCCEEDED:
                assert row[4] == "retried: done", row
            elif state is TaskState.FAILED:
                assert row[4] in ("gave up", "retried"), row
            assert not row[4].startswith("retry in"), f"agent {agent + 1}: a retry long done still counts down"
        assert {row[1] for row in shown if row[4] == "gave up"} == {"#13", "#42", "#77"}


def test_a_countdown_always_fits_its_column():
    width = dict(COLUMNS)["next"]
    for seconds in (-1, 0, 0.04, 1.5, 9.96, 10, 42.4, 99, 600, 3599, 7200, 86400 * 3):
        text = retry_countdown(seconds)
        assert len(text) <= width, text
    assert retry_countdown(0) == "next slot"


async def test_c_filters_by_class_and_u_groups_repeats(app_on_run):
    app = app_on_run()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        log = app.query_one(ErrorLog)
        every = rows(log)
        classes = sorted({row[2] for row in every})
        assert len(classes) >= 2, every
        log.focus()
        for expected in classes:
            await pilot.press("c")
            await wait_for(
                pilot, lambda expected=expected: log.class_filter == expected, what=f"c to show only {expected}"
            )
            assert {row[2] for row in rows(log)} == {expected}
            assert f"class {expected}" in str(log.border_title)
        await pilot.press("c")
        await wait_for(pilot, lambda: log.class_filter is None, what="c round to every class again")
        assert rows(log) == every
        await pilot.press("u")
        await wait_for(pilot, lambda: log.grouped, what="u to group repeats")
        grouped = rows(log)
        assert len(grouped) < len(every)
        repeated = [row for row in grouped if row[1].startswith("×")]
        assert repeated, grouped
        counts = {}
        for row in every:
            key = (row[2], row[3], row[5])
            counts[key] = counts.get(key, 0) + 1
        assert sorted(int(row[1][1:]) for row in repeated) == sorted(n for n in counts.values() if n > 1)
        await pilot.press("u")
        await wait_for(pilot, lambda: not log.grouped and rows(log) == every, what="u again: every row")


async def test_the_log_says_what_a_retry_costs_before_it_is_sent(app_on_run):
    app = app_on_run()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        log = app.query_one(ErrorLog)
        log.focus()
        row = next(n for n, r in enumerate(rows(log)) if r[1] == "#77")
        log.move_cursor(row=row)
        await wait_for(pilot, lambda: "R retry #77" in str(log.border_title), what="the title to say what R does")
        title = str(log.border_title)
        assert "⏎ #77 detail" in title and ("$" in title or "price unknown" in title), title
