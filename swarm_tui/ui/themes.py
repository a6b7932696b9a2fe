"""Themes: Textual `Theme` objects built from the TOML files in `themes/`.

The bundled files (swarm-dark, swarm-light, swarm-high-contrast) are what a user copies to
make their own; `--theme NAME` picks one, `--theme path/to/file.toml` loads a file. Top-level
keys are Textual's colours; `[variables]` holds swarm-tui's own (`swarm-*`). A theme file needs
only its `name` and the colours it changes: the rest comes from swarm-dark (swarm-light for a
file that says `dark = false`), the grid's colours included.

Only these themes are offered (the `t` cycle, the palette's Theme command): Textual's own
themes carry none of the grid's colours and most fail the contrast the bundled ones are held to
(`tests/test_ui_console.py`), so the console unregisters them. The theme chosen is remembered
as the config's `[defaults] theme` (`remember_theme`), the rest of the file kept as it was.

`ThemeManager` is the app's part that does all this for one console, from its construction on
(the theme must be set before the first frame): what is registered, the cycle, the user's file
by the name it registers, the choice last remembered.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import asdict, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

import tomli_w
from textual.app import App
from textual.color import Color, ColorParseError
from textual.theme import BUILTIN_THEMES, Theme

from swarm_tui.config import write_private
from swarm_tui.core.errors import InputError
from swarm_tui.util.locations import bundled

DEFAULT_THEME = "swarm-dark"
THEME_ORDER = ("swarm-dark", "swarm-light", "swarm-high-contrast")
"""The `t` key's cycle (then any user theme)."""

_THEME_FIELDS = {f.name for f in fields(Theme)} - {"variables"}


def load_theme_file(path: Path) -> Theme:
    """One theme file as a `Theme`; `InputError` (exit 2) names the file and field when wrong."""
    path = Path(path)
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError.single(path, "theme", f"cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError.single(path, "toml", str(exc)) from None
    return theme_from_dict(doc, source=str(path))


def theme_from_dict(doc: dict[str, Any], *, source: str, base: Theme | None = None) -> Theme:
    """A theme from a file's table; what it leaves out comes from `base` (none: swarm-dark, or
    swarm-light for `dark = false`; the bundled files themselves need no base)."""
    doc = dict(doc)
    variables = doc.pop("variables", {}) or {}
    if not isinstance(variables, dict) or not all(isinstance(v, str) for v in variables.values()):
        raise InputError.single(source, "variables", "must be a table of colour strings")
    unknown = sorted(set(doc) - _THEME_FIELDS)
    if unknown:
        raise InputError.single(source, unknown[0], f"unknown theme key (known: {', '.join(sorted(_THEME_FIELDS))})")
    if not isinstance(doc.get("name"), str) or not doc["name"]:
        raise InputError.single(source, "name", "required (a string)")
    for key, value in variables.items():
        try:
            Color.parse(value)
        except ColorParseError as exc:
            raise InputError.single(source, f"variables.{key}", str(exc)) from None
    if base is None:
        base = _base_theme(dark=doc.get("dark", True) is not False)
    inherited = {k: v for k, v in asdict(base).items() if k in _THEME_FIELDS and v is not None}
    merged = {**inherited, **doc}
    if not isinstance(merged.get("primary"), str) or not merged["primary"]:
        raise InputError.single(source, "primary", "required (a string)")
    theme = Theme(**merged, variables={**base.variables, **{str(k): v for k, v in variables.items()}})
    try:
        theme.to_color_system().generate()
    except Exception as exc:  # a bad colour: Textual's own message names it
        raise InputError.single(source, "colors", str(exc)) from None
    return theme


def _base_theme(*, dark: bool) -> Theme:
    name = DEFAULT_THEME if dark else "swarm-light"
    path = bundled("themes") / f"{name}.toml"
    return theme_from_dict(tomllib.loads(path.read_text(encoding="utf-8")), source=str(path), base=_NO_BASE)


_NO_BASE = Theme(name="-", primary="#000000")
"""A bundled file's base: nothing (it names every colour itself)."""


def bundled_themes() -> list[Theme]:
    """The themes shipped in `themes/`, the cycle's ones first."""
    folder = bundled("themes")
    themes = {path.stem: _load_bundled(path) for path in sorted(folder.glob("*.toml"))}
    order = [name for name in THEME_ORDER if name in themes] + sorted(set(themes) - set(THEME_ORDER))
    return [themes[name] for name in order]


def _load_bundled(path: Path) -> Theme:
    """A bundled file: complete, it inherits nothing."""
    return theme_from_dict(tomllib.loads(path.read_text(encoding="utf-8")), source=str(path), base=_NO_BASE)


def swarm_variable_defaults() -> dict[str, str]:
    """swarm-dark's `swarm-*` colours. An app hosting swarm-tui's widgets returns these from
    `get_theme_variable_defaults`, or their CSS does not parse (Textual asks from the app's
    construction on, and at each change of theme: read once)."""
    return dict(_swarm_variables())


@lru_cache(maxsize=1)
def _swarm_variables() -> tuple[tuple[str, str], ...]:
    return tuple(_base_theme(dark=True).variables.items())


def looks_like_path(name: str) -> bool:
    return name.endswith(".toml") or "/" in name or "\\" in name


def known_theme_names() -> set[str]:
    """The themes `--theme NAME` and `[defaults] theme` may name (Textual's own are not offered)."""
    return {path.stem for path in bundled("themes").glob("*.toml")}


def drop_textual_themes(app: App[Any]) -> None:
    """Unregister Textual's built-in themes (the app's theme must be set to one of ours first):
    the palette's Theme command then offers only themes with the grid's colours."""
    for name in BUILTIN_THEMES:
        if name != app.theme:
            app.unregister_theme(name)


DEFAULTS_TABLE = re.compile(r"^\s*\[\s*defaults\s*\]\s*(#.*)?$")
TABLE_HEADER = re.compile(r"^\s*\[")
THEME_KEY = re.compile(r"^\s*(theme|\"theme\"|'theme')\s*=")


def remember_theme(config_path: Path, theme: str) -> None:
    """Write `theme` as the config's `[defaults] theme`, keeping the rest of the file as it is
    (its comments and order too: only that line is written, by tomli-w; a file whose
    `[defaults]` is not a plain table is read and written whole instead). A config that does
    not parse is left alone (InputError, naming it)."""
    path = Path(config_path)
    line = tomli_w.dumps({"theme": theme}).strip()
    if not path.exists():
        write_private(path, tomli_w.dumps({"defaults": {"theme": theme}}))
        return
    text = path.read_text(encoding="utf-8")
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError.single(path, "toml", f"not remembering the theme: {exc}") from None
    wanted = {**doc, "defaults": {**(doc.get("defaults") or {}), "theme": theme}}
    edited = _with_theme_line(text, line)
    if edited is None or tomllib.loads(edited) != wanted:
        edited = tomli_w.dumps(wanted)
    write_private(path, edited)


def _with_theme_line(text: str, line: str) -> str | None:
    """`text` with its `[defaults]` table's theme line replaced (or added under the header,
    or a `[defaults]` table added at the end); None when the table is not found as a header."""
    lines = text.splitlines(keepends=True)
    start = next((n for n, row in enumerate(lines) if DEFAULTS_TABLE.match(row)), None)
    if start is None:
        if re.search(r"^\s*defaults\s*[.=]", text, re.M):
            return None  # dotted keys or an inline table: not a header to edit under
        return text + ("" if text.endswith("\n") or not text else "\n") + f"\n[defaults]\n{line}\n"
    end = next((n for n in range(start + 1, len(lines)) if TABLE_HEADER.match(lines[n])), len(lines))
    for n in range(start + 1, end):
        if THEME_KEY.match(lines[n]):
            lines[n] = line + "\n"
            return "".join(lines)
    lines.insert(start + 1, line + "\n")
    return "".join(lines)


def check_theme(name: str | None, known: set[str] | None = None) -> None:
    """Fail early (exit 2, before anything is written or sent) on a theme that cannot load."""
    if not name:
        return
    known = known_theme_names() if known is None else known
    if looks_like_path(name):
        load_theme_file(Path(name).expanduser())
    elif name not in known:
        raise InputError.single(
            "--theme",
            "theme",
            f"no theme named {name!r} (known: {', '.join(sorted(known))}; or give a path to a .toml theme file)",
        )


class ThemeManager:
    """One console's themes: swarm-tui's (and a user's file) registered and Textual's dropped,
    the `t` cycle, and the theme chosen remembered in the config."""

    def __init__(self, app: App[Any], wanted: str, config_path: Path) -> None:
        """`wanted`: `--theme`, else the config's, else the default: a name or a file's path."""
        self._app = app
        self._config_path = config_path
        self._paths: dict[str, str] = {}
        """A user's theme file by the name it registers: what the config remembers for it."""
        self.problem: str | None = None
        """Why the theme shown is not the one asked for (said once the screen is up: `say_problem`)."""
        self.cycle = self._register(wanted)
        """The themes `t` cycles through, in order (a user's file last)."""
        self._saved = app.theme
        """The theme the config has (or had when the console started): not written again."""

    def _register(self, wanted: str) -> list[str]:
        """swarm-tui's themes (and a user's file) only: Textual's own carry none of the grid's
        colours, and most fail the contrast the bundled ones are held to."""
        app = self._app
        bundled = bundled_themes()
        for theme in bundled:
            app.register_theme(theme)
        cycle = [t.name for t in bundled if t.name in THEME_ORDER]
        if looks_like_path(wanted):
            try:
                user = load_theme_file(Path(wanted).expanduser())
            except InputError as exc:  # a remembered file gone since: the default, said at mount
                self.problem = str(exc)
                wanted = DEFAULT_THEME
            else:
                app.register_theme(user)
                self._paths[user.name] = wanted
                cycle.append(user.name)
                wanted = user.name
        if wanted not in cycle:
            self.problem = f"no swarm-tui theme named {wanted!r} (known: {', '.join(cycle)})"
            wanted = DEFAULT_THEME
        app.theme = wanted
        drop_textual_themes(app)
        return cycle

    def say_problem(self) -> None:
        """The theme asked for could not be shown: say why (once the screen can)."""
        if self.problem:
            self._app.notify(
                f"{self.problem}; {DEFAULT_THEME} instead", title="Theme", severity="warning", markup=False
            )

    def next(self) -> None:
        """`t`: the next theme of the cycle."""
        app = self._app
        cycle = self.cycle or [app.theme]
        position = cycle.index(app.theme) if app.theme in cycle else -1
        app.theme = cycle[(position + 1) % len(cycle)]
        app.notify(f"Theme: {app.theme}", timeout=2)

    def remember(self, theme: str) -> None:
        """A theme chosen (`t`, the palette's Theme): remembered as the config's `[defaults] theme`."""
        if theme == self._saved:
            return
        self._saved = theme
        try:
            remember_theme(self._config_path, self._paths.get(theme, theme))
        except (OSError, InputError) as exc:
            self._app.notify(f"Theme not remembered: {exc}", severity="warning", markup=False)
