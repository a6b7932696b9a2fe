"""The provider pane as a new user meets it, in the real app (Textual's pilot): where typing goes,
what is focused, what the SIMULATED banner says, and a new profile made from it."""

from __future__ import annotations

import tomllib

from swarm_tui.ui.screens.provider import ProviderScreen
from textual.widgets import Input, Select, Static

from tests.helpers import wait_until


def messages(app) -> list[str]:
    return [n.message for n in app._notifications]


async def open_pane(app, pilot) -> ProviderScreen:
    await pilot.press("e")
    await wait_until(lambda: isinstance(app.screen, ProviderScreen), "the provider pane", step=pilot.pause)
    await pilot.pause()
    return app.screen


async def test_letters_typed_in_the_pane_never_fire_the_apps_keys(app_on_run):
    """`m` flushed the memory (and `h`, `g`, `t` did their things) while one typed in the pane,
    its focus on the profile list where nothing showed it. Typing goes to the name field first;
    on the list, a letter does nothing at all."""
    app = app_on_run()
    async with app.run_test(size=(120, 40)) as pilot:
        pane = await open_pane(app, pilot)
        name = pane.query_one("#f-name", Input)
        assert pane.focused is name, pane.focused
        theme, heat, before = app.theme, app.run_panel.text.plain, len(messages(app))
        await pilot.press("end", "x", "m")
        assert name.value == "simxm"
        pane.query_one("#profile-select", Select).focus()
        await pilot.pause()
        await pilot.press("m", "g", "h", "t", "q")
        await pilot.pause()
        assert messages(app)[before:] == [], messages(app)[before:]
        assert isinstance(app.screen, ProviderScreen) and app.theme == theme and app.is_running
        assert app.run_panel.text.plain == heat, "h (heat) did not fire"


async def test_the_focused_field_is_drawn_apart(app_on_run):
    app = app_on_run()
    async with app.run_test(size=(120, 40)) as pilot:
        pane = await open_pane(app, pilot)
        name, model = pane.query_one("#f-name", Input), pane.query_one("#f-model", Input)
        focused = name.rich_style
        await pilot.press("tab", "tab")
        await pilot.pause()
        assert pane.focused is model
        assert model.rich_style != name.rich_style and model.rich_style == focused


async def test_the_simulated_banner_goes_while_a_real_url_is_typed(app_on_run):
    app = app_on_run()
    async with app.run_test(size=(120, 40)) as pilot:
        pane = await open_pane(app, pilot)
        banner = pane.query_one("#simulated", Static)
        assert banner.display, "the sim profile: SIMULATED"
        pane.query_one("#f-base_url", Input).focus()
        await pilot.press(*"https://api.example.com/v1")
        await wait_until(lambda: not banner.display, "the banner to go", step=pilot.pause)
        for _ in range(len("https://api.example.com/v1")):
            await pilot.press("backspace")
        await wait_until(lambda: banner.display, "the banner back with the URL gone", step=pilot.pause)


async def test_a_new_profile_is_made_and_saved_from_the_pane(app_on_run, tmp_path):
    app = app_on_run()
    async with app.run_test(size=(120, 40)) as pilot:
        pane = await open_pane(app, pilot)
        await pilot.click("#new")
        await wait_until(lambda: pane.query_one("#f-name", Input).value == "", "a blank form", step=pilot.pause)
        assert pane.focused is pane.query_one("#f-name", Input)
        assert not pane.query_one("#simulated", Static).display
        await pilot.press(*"relay")
        pane.query_one("#f-base_url", Input).focus()
        await pilot.press(*"https://relay.example/v1")
        pane.query_one("#f-model", Input).focus()
        await pilot.press(*"gpt-4.1", "ctrl+s")
        await wait_until(
            lambda: "saved profile 'relay'" in str(pane.query_one("#probe-result", Static).content),
            "the new profile saved",
            step=pilot.pause,
        )
        saved = tomllib.loads((tmp_path / "config.toml").read_text())["providers"]
        relay = saved["relay"]
        assert (relay["base_url"], relay["model"]) == ("https://relay.example/v1", "gpt-4.1"), saved
        assert "sim" not in saved, "the profile it started from was left as it was"
        assert pane.query_one("#profile-select", Select).value == "relay"
