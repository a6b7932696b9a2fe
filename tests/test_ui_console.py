"""The console's rough edges (issue 12), tried as a new user would at 80x24 and 120x40:
readable themes, figures with their units, a clock that stops, limits that say which is which,
keys that say why they do nothing, a palette without doubles."""

from __future__ import annotations

import pytest
from textual.color import Color
from textual.widgets import Footer

from swarm_tui.ui.contrast import AA_TEXT, contrast_ratio, readable_on
from swarm_tui.ui.themes import bundled_themes

from .test_ui_snapshots import app_on_run, finished_run  # noqa: F401  (fixtures)

THEMES = [theme.name for theme in bundled_themes()]
TEXT_ROLES = ("foreground", "text", "text-muted", "primary", "accent", "warning", "error", "success",
              "footer-key-foreground", "footer-description-foreground")
BACKGROUNDS = ("background", "surface", "panel")
GRAPHICS = range(0x2500, 0x2600)
"""Box drawing, block elements and geometric shapes: borders, scrollbars, sparklines, swatches
and a select's arrow are not text."""


def resolve(value: str, background: Color) -> Color:
    """A theme colour as it lands on `background`: `auto N%` and alpha resolved."""
    if value.startswith("auto"):
        alpha = float(value.split()[1].rstrip("%")) / 100 if " " in value else 1.0
        return background.blend(background.get_contrast_text(1.0), alpha)
    return background + Color.parse(value)


@pytest.mark.parametrize("theme", THEMES)
def test_every_bundled_theme_meets_aa_on_its_colour_pairs(theme):
    colours = next(t for t in bundled_themes() if t.name == theme).to_color_system().generate()
    variables = next(t for t in bundled_themes() if t.name == theme).variables
    too_low = []
    for bg_name in BACKGROUNDS:
        background = Color.parse(colours[bg_name])
        for role in TEXT_ROLES:
            ratio = contrast_ratio(resolve(colours[role], background), background)
            if ratio < AA_TEXT:
                too_low.append(f"${role} on ${bg_name}: {ratio:.2f}")
    for name, value in variables.items():  # agent cells and badges: black or white text on them
        cell = Color.parse(value)
        ratio = contrast_ratio(readable_on(cell), cell)
        if ratio < AA_TEXT:
            too_low.append(f"text on ${name}: {ratio:.2f}")
    for badge in ("swarm-simulated", "swarm-attached"):  # drawn in $background
        ratio = contrast_ratio(Color.parse(colours["background"]), Color.parse(variables[badge]))
        if ratio < AA_TEXT:
            too_low.append(f"$background on ${badge}: {ratio:.2f}")
    assert not too_low, f"{theme} is below WCAG AA (4.5:1) for: " + "; ".join(too_low)


def low_contrast_text(app) -> list[str]:
    """Every run of text on the screen as drawn, whose colour is below AA on its background;
    keys shown disabled (WCAG exempts inactive controls) and graphics are left out."""
    screen = app.screen
    update = screen._compositor.render_full_update()
    found = []
    for y, line in enumerate(update.strips):
        x = 0
        for strip in line:
            for segment in strip:
                text, style = segment.text, segment.style
                width = segment.cell_length
                visible = [c for c in text if not c.isspace() and ord(c) not in GRAPHICS]
                if visible and style is not None and style.color is not None and style.bgcolor is not None:
                    fg, bg = style.color, style.bgcolor
                    if style.reverse:
                        fg, bg = bg, fg
                    ratio = contrast_ratio(Color.from_rich_color(fg), Color.from_rich_color(bg))
                    widget, _ = screen.get_widget_at(x, y)
                    disabled = widget.has_class("-disabled") or any(
                        getattr(node, "disabled", False) for node in widget.ancestors_with_self)
                    if ratio < AA_TEXT and not disabled:
                        found.append(f"{text.strip()!r} at {x},{y} ({type(widget).__name__}) {ratio:.2f}:1")
                x += width
    return found


VIEWS = {
    "main": [],
    "heat": ["h"],
    "help": ["question_mark"],
    "detail": ["down", "right", "right", "enter"],
    "projection": ["dollar_sign"],
    "provider": ["e"],
}


@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("theme", THEMES)
async def test_every_text_on_screen_meets_aa_in_every_theme(app_on_run, theme, view):
    app = app_on_run(theme=theme)
    async with app.run_test(size=(120, 40)) as pilot:
        for key in VIEWS[view]:
            await pilot.press(key)
        await pilot.pause()
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()
        assert app.screen.query(Footer) or view in ("help", "provider")
        assert low_contrast_text(app) == []
