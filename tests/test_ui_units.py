"""The TUI's parts on their own: formatting, themes, the grid's layout and drawing, the error
log's literal provider text, and the CLI's early checks."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from swarm_tui.cli import main
from swarm_tui.core.call_errors import CallError, ErrorClass
from swarm_tui.core.errors import InputError
from swarm_tui.core.events import Attempt
from swarm_tui.engine import TaskState
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.ui import format as fmt
from swarm_tui.ui.screens.provider import profile_from_form
from swarm_tui.ui.themes import bundled_themes, check_theme, load_theme_file, swarm_variable_defaults
from swarm_tui.ui.widgets.errorlog.error_log import ErrorLog, Failure
from swarm_tui.ui.widgets.grid.agent_grid import AgentGrid
from textual.app import App, ComposeResult

from tests.helpers import wait_until

# --------------------------------------------------------------------------- formatting


def test_fixed_width_fields_keep_their_width_whatever_the_value():
    for value in (0, 7, 999, 1_000, 12_345, 999_999, 1_234_567, 98_765_432_100):
        assert len(fmt.si(value)) == 5, value
    for value in (None, 0.4, 812.3, 9_999, 12_345, 654_321, 7_200_000):
        assert len(fmt.ms(value, 6)) == 6, value
    for value in (0.0, 0.0262, 9.99, 123.45, 98_765.0):
        assert len(fmt.usd(value, 9)) == 9, value
    assert fmt.duration(None) == "--:--" and fmt.duration(75) == "01:15" and fmt.duration(3725) == "1:02:05"


def test_display_currency_defaults_to_the_official_cny_rate_and_is_configurable():
    from swarm_tui.pricing.currency import USD, resolve_currency

    assert fmt.money(1.0, resolve_currency("CNY")).strip() == "≈¥7.30"  # the official ¥7.3 = $1
    assert fmt.money(1.0, resolve_currency("CNY", 1.0)).strip() == "≈¥1.00"  # a relay billing ¥1 = $1
    assert fmt.money(1.0, USD).strip() == ""
    assert len(fmt.money(123456.0, resolve_currency("CNY"), 11)) == 11


def test_pretty_json_finds_json_in_fences_and_repairs_truncated_endings():
    assert json.loads(fmt.pretty_json('{"a": [1, 2]}')) == {"a": [1, 2]}
    assert json.loads(fmt.pretty_json('Here:\n```json\n{"ok": true}\n```\nbye')) == {"ok": True}
    assert json.loads(fmt.pretty_json('{"items": [{"n": 1}, {"n": 2')) == {"items": [{"n": 1}, {"n": 2}]}
    assert fmt.pretty_json("RESULT: plain text") is None


# --------------------------------------------------------------------------- themes


def test_bundled_themes_load_with_the_swarm_variables():
    themes = {theme.name: theme for theme in bundled_themes()}
    assert {"swarm-dark", "swarm-light", "swarm-high-contrast"} <= set(themes)
    for theme in themes.values():
        assert {"swarm-failed", "swarm-succeeded", "swarm-heat-5", "swarm-simulated"} <= set(theme.variables)
    assert not themes["swarm-light"].dark


def test_a_user_theme_file_needs_only_what_it_changes(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text('name = "mine"\n[variables]\nswarm-failed = "#ff0000"\n')  # no primary: swarm-dark's
    theme = load_theme_file(path)
    dark = next(t for t in bundled_themes() if t.name == "swarm-dark")
    assert theme.name == "mine" and theme.variables == {**dark.variables, "swarm-failed": "#ff0000"}
    assert (theme.primary, theme.background, theme.dark) == (dark.primary, dark.background, True)
    check_theme(str(path))
    path.write_text('name = "mine-light"\ndark = false\nprimary = "#0000aa"\n')
    light = next(t for t in bundled_themes() if t.name == "swarm-light")
    theme = load_theme_file(path)
    assert (theme.primary, theme.background, theme.variables) == ("#0000aa", light.background, light.variables)


@pytest.mark.parametrize(
    "text, field",
    [
        ('primary = "#fff"\n', "name"),
        ('name = "x"\n[variables]\nswarm-failed = "not a colour"\n', "variables.swarm-failed"),
        ('name = "x"\nprimary = "#fff"\ncolour = "red"\n', "colour"),
        ('name = "x"\nprimary = "not a colour"\n', "colors"),
        ('name = "x"\nprimary = ', "toml"),
    ],
)
def test_a_broken_theme_file_names_the_field(tmp_path, text, field):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(InputError) as raised:
        load_theme_file(path)
    assert raised.value.problems[0].field == field and str(path) in str(raised.value)


def test_an_unknown_theme_fails_before_a_run_directory_is_made(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SWARM_TUI_FORCE_TUI", "1")
    out = tmp_path / "run"
    assert main(["run", "--theme", "no-such-theme", "--out", str(out)]) == 2
    assert "no-such-theme" in capsys.readouterr().err
    assert not out.exists()


def test_attach_to_a_directory_without_a_journal_exits_2(tmp_path, capsys):
    assert main(["attach", str(tmp_path)]) == 2
    assert "no journal" in capsys.readouterr().err


# --------------------------------------------------------------------------- provider form


def test_the_provider_form_validates_and_never_holds_a_key():
    base = ProviderProfile(name="sim")
    profile = profile_from_form(
        "relay",
        {
            "base_url": "https://api.example.com/v1",
            "model": "kimi-k2.5",
            "api_key_env": "RELAY_KEY",
            "concurrency": "20",
            "timeout": "15",
        },
        base,
    )
    assert (profile.name, profile.concurrency, profile.timeout, profile.api_key_env) == ("relay", 20, 15.0, "RELAY_KEY")
    assert "key" not in json.dumps(profile.to_toml()).replace("api_key_env", "")
    with pytest.raises(ValueError, match="concurrency"):
        profile_from_form("relay", {"concurrency": "many"}, base)
    with pytest.raises(ValueError, match="base URL"):
        profile_from_form("relay", {"base_url": "ftp://nope"}, base)


# --------------------------------------------------------------------------- grid


class GridApp(App):
    """A grid alone, fitted as the console fits it at 80x24: `size` beside a full run panel, 12
    columns more beside a narrow one."""

    def __init__(self, n: int, size: tuple[int, int]) -> None:
        super().__init__()
        self.states = {i: TaskState.QUEUED for i in range(n)}
        self.fit_to = (*size, size[0] + 12)

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return swarm_variable_defaults()

    def compose(self) -> ComposeResult:
        yield AgentGrid(list(self.states), self.states)

    def on_mount(self) -> None:
        self.query_one(AgentGrid).fit(*self.fit_to)


async def test_100_agents_make_a_10x10_grid_of_numbered_cells():
    app = GridApp(100, (40, 13))
    async with app.run_test(size=(80, 24)):
        grid = app.query_one(AgentGrid)
        assert (grid.columns, grid.rows, grid.compact) == (10, 10, False)
        assert grid.render_line(0).text.split() == [part for n in range(1, 11) for part in (".", str(n))]
        assert grid.render_line(9).text.split()[-1] == ".100", "a glyph and the number in every cell"


async def test_1000_agents_go_compact_and_scroll_at_80x24():
    app = GridApp(1000, (40, 12))
    async with app.run_test(size=(80, 24)) as pilot:
        grid = app.query_one(AgentGrid)
        assert grid.compact and grid.rows > 12 and grid.size.height == 12
        grid.focus()
        await pilot.press("end")
        assert grid.cursor_index == 999
        assert grid.scroll_offset.y > 0, "the cursor's row scrolled into view"


async def test_a_state_change_redraws_only_its_row_in_the_state_colour():
    app = GridApp(100, (40, 13))
    async with app.run_test(size=(80, 24)) as pilot:
        grid = app.query_one(AgentGrid)
        grid.focus()
        await pilot.press("down", "right")
        assert grid.cursor_index == 11
        for row in range(10):
            grid.render_line(row)
        cached = dict(grid._rows)
        app.states[42] = TaskState.FAILED
        grid.update_cells({42})
        assert set(grid._rows) == set(range(10)) - {4}, "only row 5 was invalidated"
        assert all(grid._rows[row] is cached[row] for row in grid._rows), "the other rows stay cached"
        cell = [segment for segment in grid.render_line(4) if segment.text.strip() == "x 43"][0]
        assert cell.style == grid.state_style(TaskState.FAILED)


async def test_a_theme_change_recolours_the_cached_rows():
    app = GridApp(20, (40, 10))
    for theme in bundled_themes():
        app.register_theme(theme)
    async with app.run_test(size=(80, 24)) as pilot:
        app.theme = "swarm-dark"
        await pilot.pause()
        grid = app.query_one(AgentGrid)
        dark = grid.render_line(0)
        app.theme = "swarm-light"
        await wait_until(
            lambda: list(grid.render_line(0))[2].style != list(dark)[2].style,
            "the cached rows to take the new theme's colours",
            step=lambda: pilot.pause(0.01),
        )
        assert grid.render_line(0).text == dark.text


async def test_enter_on_a_cell_posts_opened_with_that_agent():
    opened = []

    class Opening(GridApp):
        def on_agent_grid_opened(self, event: AgentGrid.Opened) -> None:
            opened.append(event.index)

    app = Opening(30, (40, 13))
    async with app.run_test(size=(80, 24)) as pilot:
        app.query_one(AgentGrid).focus()
        await pilot.press("down", "down", "right", "enter")
        await pilot.pause()
    assert opened == [21]


# --------------------------------------------------------------------------- error log


class LogApp(App):
    def compose(self) -> ComposeResult:
        yield ErrorLog()


async def test_provider_text_is_shown_literally_never_as_markup():
    message = "bad [red]markup[/red] and [link=http://x]link[/link] \\[escaped]"
    error = CallError(ErrorClass.SERVER, message, 500)
    attempt = Attempt(4, 1, "sim", 1_700_000_000.0, 120.0, "failed", status=500, error=error)
    app = LogApp()
    async with app.run_test(size=(120, 10)):
        log = app.query_one(ErrorLog)
        again = [Attempt(i, 1, "sim", 1_700_000_000.0, 120.0, "retry", status=500, error=error) for i in (5, 6)]
        log.add_failures(
            [Failure.final(attempt), Failure.retrying(again[0], 1.5), Failure.retrying(again[1], math.nan)]
        )
        row = log.get_row_at(0)
        assert row[5].plain == message and not row[5].spans and row[5].overflow == "ellipsis"
        assert row[1].plain == "#5" and row[2].plain == "server_error" and row[3].plain == "500"
        assert [log.get_row_at(i)[4].plain for i in range(3)] == ["gave up", "retry in 1.5s", "retrying"]


@pytest.mark.parametrize("module", ["swarm_tui.ui.format", "swarm_tui.frontend.attached"])
def test_format_module_and_attach_are_plain_python(module):
    """Each imported on its own, in a fresh interpreter: none of Textual comes with it."""
    code = f"import sys, {module}\nprint(','.join(sorted(m for m in sys.modules if m.split('.')[0] == 'textual')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    loaded = out.split(",") if out else []
    assert not loaded, f"importing {module} loads {len(loaded)} Textual modules: {', '.join(loaded[:3])}, ..."
