"""Themes: Textual `Theme` objects built from the TOML files in `themes/`.

The bundled files (swarm-dark, swarm-light, swarm-high-contrast) are what a user copies to
make their own; `--theme NAME` picks a registered theme, `--theme path/to/file.toml` loads
one. Top-level keys are Textual's colours; `[variables]` holds swarm-tui's own (`swarm-*`),
and a variable a user theme leaves out falls back to swarm-dark's value, so a theme file
only needs the colours it changes.
"""

from __future__ import annotations

import tomllib
from dataclasses import fields
from pathlib import Path
from typing import Any

from textual.theme import Theme

from ..errors import InputError
from ..locations import bundled

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


def theme_from_dict(doc: dict[str, Any], *, source: str) -> Theme:
    doc = dict(doc)
    variables = doc.pop("variables", {}) or {}
    if not isinstance(variables, dict) or not all(isinstance(v, str) for v in variables.values()):
        raise InputError.single(source, "variables", "must be a table of colour strings")
    unknown = sorted(set(doc) - _THEME_FIELDS)
    if unknown:
        raise InputError.single(source, unknown[0], f"unknown theme key (known: {', '.join(sorted(_THEME_FIELDS))})")
    for key in ("name", "primary"):
        if not isinstance(doc.get(key), str) or not doc[key]:
            raise InputError.single(source, key, "required (a string)")
    theme = Theme(**doc, variables={str(k): v for k, v in variables.items()})
    try:
        theme.to_color_system().generate()
    except Exception as exc:  # a bad colour: Textual's own message names it
        raise InputError.single(source, "colors", str(exc)) from None
    return theme


def bundled_themes() -> list[Theme]:
    """The themes shipped in `themes/`, the cycle's ones first."""
    folder = bundled("themes")
    themes = {path.stem: load_theme_file(path) for path in sorted(folder.glob("*.toml"))}
    order = [name for name in THEME_ORDER if name in themes] + sorted(set(themes) - set(THEME_ORDER))
    return [themes[name] for name in order]


def swarm_variable_defaults() -> dict[str, str]:
    """swarm-dark's `swarm-*` colours: what any theme (a Textual one, a partial user file)
    falls back to. An app hosting swarm-tui's widgets returns these from
    `get_theme_variable_defaults`, or their CSS does not parse."""
    return dict(load_theme_file(bundled("themes") / f"{DEFAULT_THEME}.toml").variables)


def looks_like_path(name: str) -> bool:
    return name.endswith(".toml") or "/" in name or "\\" in name


def known_theme_names() -> set[str]:
    from textual.theme import BUILTIN_THEMES

    return {path.stem for path in bundled("themes").glob("*.toml")} | set(BUILTIN_THEMES)


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
