"""The provider pane refuses a key typed where its env var's NAME belongs (Textual's Pilot).

The refusal is a field error: the field is marked, the message says what is expected without
repeating the value, the key is masked on screen, and nothing is written to the config file.
"""

from __future__ import annotations

import tomllib

from swarm_tui.config import Config
from swarm_tui.ui.app import make_app
from swarm_tui.ui.screens.provider import ProviderScreen
from textual.widgets import Input, Static

from tests.helpers import open_session

KEY = "sk-proj-abcDEF0123456789ghiJKL0123456789"


def key_on_screen(app) -> bool:
    """Whether any 12 characters of KEY are on screen (a narrow field shows part of a value)."""
    screen = app.export_screenshot()
    return any(KEY[i : i + 12] in screen for i in range(len(KEY) - 11))


async def test_typing_a_key_into_the_key_env_field_is_a_field_error_and_saves_nothing(tmp_path, sim):
    session = open_session(tmp_path, sim.base_url, ["hello"])
    config_path = tmp_path / "config" / "config.toml"
    app = make_app(session, config=Config(path=config_path), start=False)
    try:
        async with app.run_test(size=(100, 40)) as pilot:
            await pilot.press("e")
            await pilot.pause()
            pane = app.screen
            assert isinstance(pane, ProviderScreen)
            field = pane.query_one("#f-api_key_env", Input)
            field.focus()
            field.value = ""
            await pilot.press(*KEY)
            await pilot.press("ctrl+s")
            await pilot.pause()

            message = str(pane.query_one("#probe-result", Static).render())
            assert message.startswith("not saved: key env var: looks like an API key"), message
            assert "field-error" in field.classes and pane.focused is field
            assert field.password, "the pasted key is masked at once"
            assert "looks like an API key" in str(pane.query_one("#key-status", Static).render())
            assert not key_on_screen(app)
            assert not config_path.exists()

            field.value = ""
            await pilot.press(*"RELAY_KEY")
            await pilot.pause()
            assert "field-error" not in field.classes and not field.password
            await pilot.press("ctrl+s")
            await pilot.pause()
            assert "saved profile 'custom'" in str(pane.query_one("#probe-result", Static).render())
    finally:
        await session.aclose()
    saved = tomllib.loads(config_path.read_text())
    assert saved["providers"]["custom"]["api_key_env"] == "RELAY_KEY"
    assert KEY not in config_path.read_text()


async def test_a_url_with_credentials_is_a_field_error_on_the_base_url(tmp_path, sim):
    session = open_session(tmp_path, sim.base_url, ["hello"])
    config_path = tmp_path / "config" / "config.toml"
    app = make_app(session, config=Config(path=config_path), start=False)
    try:
        async with app.run_test(size=(100, 40)) as pilot:
            await pilot.press("e")
            await pilot.pause()
            pane = app.screen
            url = pane.query_one("#f-base_url", Input)
            url.value = f"https://me:{KEY}@api.example.com/v1"
            await pilot.pause()
            await pilot.press("ctrl+s")
            await pilot.pause()
            message = str(pane.query_one("#probe-result", Static).render())
            assert message.startswith("not saved: base URL: must not carry credentials"), message
            assert KEY not in message and "field-error" in url.classes and url.password
            assert not key_on_screen(app)
            assert not config_path.exists()
            await pilot.press("ctrl+t")  # testing the connection is refused the same way
            await pilot.pause()
            assert str(pane.query_one("#probe-result", Static).render()).startswith("cannot test: base URL:")
    finally:
        await session.aclose()
