"""A few lines of styled text drawn with the line API: the base of the console's small panels."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.strip import Strip
from textual.widget import Widget


def _height(text: Text) -> int:
    """A panel's lines for `text` (a last newline ends a line; it starts none): the same count
    decides both the height and whether a change needs a layout pass."""
    return len(text.plain.rstrip("\n").split("\n")) if text.plain else 1


class TextPanel(Widget):
    """A few lines of styled text, drawn with the line API from strips cached per change.

    Cheaper than a `Static` for text that changes ten times a second: the `Text` is split
    into lines and rendered to segments once per change, with none of the markup, wrapping
    and visual conversion a `Static` does on every repaint.
    """

    DEFAULT_CSS = """
    TextPanel { height: auto; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._text = Text()
        self._key: tuple | None = None
        self._strips: list[Strip] | None = None
        self._base: Style | None = None

    def show(self, text: Text) -> None:
        key = (text.plain, tuple(text.spans))
        if key != self._key:
            height_changed = self._key is None or _height(text) != _height(self._text)
            self._key = key
            self._text = text
            self._strips = None
            self.refresh(layout=height_changed)
            if height_changed and self.is_mounted:
                # Once more after this refresh: a layout of the screen that runs before this panel's
                # own request reaches it keeps the row's old arrangement (seen in a terminal, never
                # under Pilot: an attached view's panel stayed a line short of its text)
                self.call_after_refresh(self.refresh, layout=True)

    @property
    def text(self) -> Text:
        """The text the panel shows now."""
        return self._text

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips = None
        self._base = None

    @property
    def base_style(self) -> Style:
        if self._base is None:
            self._base = self.rich_style
        return self._base

    def get_content_height(self, container, viewport, width: int) -> int:
        return _height(self._text)

    def render_line(self, y: int) -> Strip:
        if self._strips is None:
            base = self.base_style
            console = self.app.console
            strips = []
            for line in self._text.split("\n", allow_blank=True):
                line.stylize_before(base)
                line.no_wrap, line.overflow = True, "ellipsis"
                strips.append(Strip(line.render(console)))
            self._strips = strips
        width = self.size.width
        base = self.base_style
        if y >= len(self._strips):
            return Strip.blank(width, base)
        strip = self._strips[y]
        if strip.cell_length > width:
            return strip.crop(0, width - 1).extend_cell_length(width - 1) + Strip([Segment("…", base)])
        return strip.extend_cell_length(width, base)
