"""Contrast of text colours, as WCAG 2 defines it. Pure functions over Textual's `Color`.

Why not Textual's `auto` colour: it picks black or white by perceived brightness, which
passes on most backgrounds but not all (white on a mid green such as #00af00 is 2.8:1). The
grid picks its numbers' colour here instead, by the ratio WCAG measures, so a theme's cell
colours stay readable whatever they are; the theme test holds every bundled theme to AA.
"""

from __future__ import annotations

from textual.color import Color

AA_TEXT = 4.5
"""WCAG 2 level AA for normal text."""
BLACK = Color(0, 0, 0)
WHITE = Color(255, 255, 255)


def relative_luminance(color: Color) -> float:
    def channel(value: int) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    return 0.2126 * channel(color.r) + 0.7152 * channel(color.g) + 0.0722 * channel(color.b)


def contrast_ratio(a: Color, b: Color) -> float:
    """From 1 (same luminance) to 21 (black on white); order does not matter."""
    high, low = sorted((relative_luminance(a), relative_luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def readable_on(background: Color) -> Color:
    """Black or white: whichever reads better on `background`."""
    return BLACK if contrast_ratio(BLACK, background) >= contrast_ratio(WHITE, background) else WHITE
