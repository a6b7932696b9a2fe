"""Every binding of the console has an id and can be remapped from the config's `[keys]`
: the grid, the detail view, the error log and the dialogs as well as the
App's own keys; `?` lists every id with its key as bound now; a wrong id is reported."""

from __future__ import annotations

import importlib
import inspect
import io
import pkgutil
from pathlib import Path

import pytest
import swarm_tui.ui
from rich.console import Console
from swarm_tui.config import Config, load_config
from swarm_tui.core.errors import InputError
from swarm_tui.engine import TaskState
from swarm_tui.ui.app import KEY_SCOPES, SwarmApp, make_app
from swarm_tui.ui.keys import LEGACY_IDS, resolve_keymap
from swarm_tui.ui.screens.detail import AgentDetailScreen
from swarm_tui.ui.screens.dialogs import ConfirmScreen, HelpScreen
from textual.app import App
from textual.binding import Binding
from textual.dom import DOMNode
from textual.widgets import Static

from tests.helpers import open_session
from tests.test_ui_app import FLAKY, on_top, wait_for


def bound_classes() -> dict[type[DOMNode], list[Binding]]:
    """Every screen, widget and app of `swarm_tui.ui` that declares bindings, found by importing
    the package's modules: a new one is found without anyone listing it."""
    found: dict[type[DOMNode], list[Binding]] = {}
    for module_info in pkgutil.walk_packages(swarm_tui.ui.__path__, "swarm_tui.ui."):
        module = importlib.import_module(module_info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and issubclass(cls, DOMNode) and cls.__dict__.get("BINDINGS"):
                found[cls] = list(Binding.make_bindings(cls.__dict__["BINDINGS"]))
    return found


def console_classes() -> dict[type[DOMNode], list[Binding]]:
    """Those the console shows: another app (`swarm-tui shadow`'s) has its own keys."""
    return {
        cls: bindings for cls, bindings in bound_classes().items() if not (issubclass(cls, App) and cls is not SwarmApp)
    }


def test_every_binding_has_an_id_unique_across_the_ui():
    classes = bound_classes()
    assert SwarmApp in classes and AgentDetailScreen in classes and len(classes) >= 10
    missing = [
        f"{cls.__name__}: {b.key} -> {b.action}" for cls, bindings in classes.items() for b in bindings if not b.id
    ]
    assert not missing, "bindings without an id (the keymap cannot move them): " + "; ".join(missing)
    owner: dict[str, str] = {}
    for cls, bindings in classes.items():
        for binding in bindings:
            assert "." in binding.id, f"{cls.__name__}: {binding.id} is not namespaced"
            assert owner.setdefault(binding.id, cls.__name__) == cls.__name__, (
                f"{binding.id} is used by {owner[binding.id]} and {cls.__name__}: one keymap moves both"
            )
    scoped = {scope for _, scope in KEY_SCOPES}
    unlisted = [cls.__name__ for cls in console_classes() if cls not in scoped]
    assert not unlisted, f"not in KEY_SCOPES (so neither remapped nor in the help): {unlisted}"


def screen_text(screen) -> str:
    """Every Static of a screen as text (the help scrolls: its off-screen part too)."""
    console = Console(width=200, record=True, file=io.StringIO())
    for static in screen.query(Static):
        console.print(static.content)
    return console.export_text()


async def test_question_mark_lists_every_binding_id_with_its_key_as_bound_now(tmp_path, sim):
    session = open_session(tmp_path, sim.base_url, [f"t{i}" for i in range(4)])
    config = Config(path=tmp_path / "config.toml", keys={"grid.open": "o", "errorlog.first": "ctrl+f"})
    app = make_app(session, config=config)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: app.phase == "DONE", what="the run to end")
            await pilot.press("question_mark")
            await wait_for(pilot, on_top(app, HelpScreen), what="? to open the help")
            lines = screen_text(app.screen).splitlines()
            for cls, bindings in console_classes().items():
                for binding in bindings:
                    assert any(binding.id in line.split() for line in lines), (
                        f"{binding.id} ({cls.__name__}) is not in the help"
                    )
            row = {
                line.split()[1]: line.split()[0]
                for line in lines
                if len(line.split()) > 1 and line.split()[1].count(".") == 1 and "=" not in line
            }
            assert row["grid.open"] == "o" and row["errorlog.first"] == "ctrl+f", "keys as bound now"
            assert row["app.help"] == "?" and row["detail.back"] == "escape"
    finally:
        await session.aclose()


def test_keys_config_takes_dotted_ids_tables_and_lists_and_names_what_is_wrong(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text(
        '[keys]\nhelp = "f1"\ngrid.cursor_down = "j"\n"detail.back" = "b"\n'
        'confirm.no = ["c", "escape"]\nnonsense = "z"\napp.heat = "r"\n'
        '[keys.errorlog]\nretry = "x"\n'
    )
    config = load_config(path)
    assert config.keys == {
        "help": "f1",
        "grid.cursor_down": "j",
        "detail.back": "b",
        "confirm.no": "c,escape",
        "nonsense": "z",
        "app.heat": "r",
        "errorlog.retry": "x",
    }
    resolved = resolve_keymap(config.keys, [scope for _, scope in KEY_SCOPES], path)
    assert resolved.keymap["app.help"] == "f1", "the App's ids from before namespacing still work"
    assert set(LEGACY_IDS.values()) <= {b.id for b in console_classes()[SwarmApp]}
    problems = "\n".join(resolved.problems)
    assert f"{path}: [keys] has no binding nonsense" in problems
    assert "app.heat = 'r' takes r from app.retry_failed, which has no key now" in problems
    path.write_text("[keys]\ngrid.open = 3\n")
    with pytest.raises(InputError, match=r"keys\.grid\.open"):
        load_config(path)


def test_the_docs_keys_example_loads_and_remaps_without_a_problem(tmp_path):
    guide = (Path(__file__).parent.parent / "docs" / "guides" / "console.md").read_text(encoding="utf-8")
    example = guide.split("**Your own keys.**", 1)[1].split("```toml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "config.toml"
    path.write_text(example)
    resolved = resolve_keymap(load_config(path).keys, [scope for _, scope in KEY_SCOPES], path)
    assert resolved.problems == [] and resolved.keymap["grid.open"] == "o,enter"


async def test_remapped_keys_of_grid_detail_error_log_and_dialog_work_and_the_old_ones_do_not(tmp_path, sim):
    path = tmp_path / "config.toml"
    path.write_text(
        '[keys]\ngrid.cursor_down = "j"\ngrid.open = "o"\ndetail.back = "b"\nerrorlog.retry = "x"\nconfirm.no = "c"\n'
    )
    prompts = [f"task {i}" + (FLAKY if i in (3, 7) else "") for i in range(12)]
    session = open_session(tmp_path, sim.base_url, prompts, max_attempts=1, concurrency=4)
    app = make_app(session, config=load_config(path))
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: app.phase == "FINISHED", what="the run to end with 2 failed")
            assert app.keys.problems == []
            grid = app.grid
            # the grid: down no longer moves the cursor, j does; Enter no longer opens, o does
            assert grid.cursor_index == 0
            await pilot.press("down")
            await pilot.pause()
            assert grid.cursor_index == 0, "down still moves the cursor"
            await pilot.press("j")
            await wait_for(pilot, lambda: grid.cursor_index == 10, what="j to move the cursor down a row")
            grid.move_to(7)
            await pilot.press("enter")
            await pilot.pause()
            assert not isinstance(app.screen, AgentDetailScreen), "enter still opens the agent"
            await pilot.press("o")
            await wait_for(pilot, on_top(app, AgentDetailScreen), what="o to open the agent")
            # the detail view: Escape no longer goes back, b does
            await pilot.press("escape")
            await pilot.pause()
            assert isinstance(app.screen, AgentDetailScreen), "escape still closes the detail"
            await pilot.press("b")
            await wait_for(pilot, lambda: not isinstance(app.screen, AgentDetailScreen), what="b to go back")
            # the error log: its retry is x now (Enter opens the row's agent, and retries nothing)
            log = app.error_log
            log.focus()
            log.move_cursor(row=[str(log.get_row_at(i)[1]) for i in range(log.row_count)].index("#4"))
            await pilot.press("enter")
            await wait_for(pilot, on_top(app, AgentDetailScreen), what="enter to open the row's agent")
            assert session.engine.states[3] is TaskState.FAILED, "enter retried in the error log"
            await pilot.press("b")
            await wait_for(pilot, lambda: not isinstance(app.screen, AgentDetailScreen), what="b to go back")
            log.focus()
            await pilot.press("x")
            await wait_for(pilot, lambda: session.engine.states[3] is TaskState.SUCCEEDED, what="x to retry agent 4")
            assert session.engine.states[7] is TaskState.FAILED, "only the row's agent was retried"
            await wait_for(pilot, lambda: not session.engine.running, what="the retry to end")
            # a dialog: n and Escape no longer cancel, c does (and its button says so)
            dialog = ConfirmScreen("Abort the run?", "test", yes="Abort")
            answers: list[bool | None] = []
            await app.push_screen(dialog, answers.append)
            await wait_for(pilot, on_top(app, ConfirmScreen), what="the dialog to open")
            assert "(c)" in str(dialog.query_one("#no").label)
            await pilot.press("n", "escape")
            await pilot.pause()
            assert app.screen is dialog and answers == [], "n or escape still cancel"
            await pilot.press("c")
            await wait_for(pilot, lambda: answers == [False], what="c to cancel the dialog")
    finally:
        await session.aclose()


async def test_a_wrong_id_in_the_config_is_named_with_the_file(tmp_path, sim):
    session = open_session(tmp_path, sim.base_url, ["t0"])
    app = make_app(session, config=Config(path=tmp_path / "config.toml", keys={"grid.nope": "x", "help": "f1"}))
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: app.phase == "DONE", what="the run to end")
            messages = [n.message for n in app._notifications]
            assert any(f"{tmp_path / 'config.toml'}: [keys] has no binding grid.nope" in m for m in messages)
            assert app.key_hint("app.help") == "f1", "hints (notifications, the palette) name the key as bound now"
            await pilot.press("f1")
            await wait_for(pilot, on_top(app, HelpScreen), what="f1 to open the help")
            assert "has no binding grid.nope" in screen_text(app.screen), "the help repeats the problem"
    finally:
        await session.aclose()
