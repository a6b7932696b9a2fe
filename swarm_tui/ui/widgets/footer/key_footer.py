"""The key footer: the keys that fit, whole, in the order the screen declares them.

Textual's `Footer` lays every shown binding out in a row and lets the terminal's edge cut the
last ones (`? Help  q▏` at 80 columns; `q Qu▏` on a busy detail screen). This one measures each
key before it mounts it and leaves out, when the row is too short, the keys the user needs
least here (each action's `rank` in `view/actions.py`: Quit/Detach, Help and Back last of
all), so that every label shown is shown whole. A key's label may also depend on the moment:
the app's `footer_label(binding_id)` says "Detach" for an attached view's quit and "Resume" for
a paused run's pause.

Each key is Textual's own `FooterKey` (its colours, hover, click and the `-disabled` look of a
key that makes no sense now; Textual exports it from no public module, and is pinned exactly),
with the footer's own paddings, so a key's width is known before layout:
`len(key) + len(label) + 3`, or 2 in the compact style a short row takes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from swarm_tui.view.actions import BY_ID, DEFAULT_RANK


@dataclass(frozen=True, slots=True)
class FooterItem:
    """One key as the footer shows it."""

    binding: Binding
    key_display: str
    label: str
    enabled: bool
    tooltip: str
    rank: int

    def width(self, compact: bool) -> int:
        return len(self.key_display) + len(self.label) + (2 if compact else 3)


def fitting(items: list[FooterItem], width: int) -> tuple[list[FooterItem], bool]:
    """The items that fit `width` whole, in their order, and whether in the compact style: all
    of them if they fit (roomy style first), else the lowest ranks that fit, compact."""
    if sum(item.width(False) for item in items) <= width:
        return items, False
    kept = list(items)
    while kept and sum(item.width(True) for item in kept) > width:
        worst = max(range(len(kept)), key=lambda n: (kept[n].rank, n))
        del kept[worst]
    return kept, True


class KeyFooter(Footer):
    """The screen's keys that fit, never one cut in half (see the module's notes)."""

    GROUP_KEYS: ClassVar[dict[str, str]] = {"Limit": "+-"}
    """A binding group shown as one key (`+-` for the concurrency ceiling's two keys)."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes, show_command_palette=False)
        self._laid_out_for = 0

    def items(self) -> list[FooterItem]:
        """Every shown binding of the screen now, one item an action (a group: one item)."""
        app = self.app
        label_of = getattr(app, "footer_label", None)
        seen_actions: set[str] = set()
        seen_groups: set[str] = set()
        items: list[FooterItem] = []
        active = self.screen.active_bindings
        palette = active.get(app.COMMAND_PALETTE_BINDING)
        entries = [(b, e, t) for (_, b, e, t) in active.values() if b.show]
        if palette is not None and app.ENABLE_COMMAND_PALETTE and palette.binding not in [b for b, _, _ in entries]:
            entries.append((palette.binding, palette.enabled, palette.tooltip))
        for binding, enabled, tooltip in entries:
            if binding.action in seen_actions:
                continue
            seen_actions.add(binding.action)
            group = binding.group
            if group is not None:
                if group.description in seen_groups:
                    continue
                seen_groups.add(group.description)
                key_display = self.GROUP_KEYS.get(group.description, app.get_key_display(binding))
                label = group.description
            else:
                key_display = app.get_key_display(binding)
                label = binding.description
            if label_of is not None and binding.id:
                label = label_of(binding.id) or label
            action = BY_ID.get(binding.id or "")
            rank = action.rank if action is not None else DEFAULT_RANK
            items.append(FooterItem(binding, key_display, label, enabled, tooltip or binding.tooltip, rank))
        return items

    def compose(self) -> ComposeResult:
        if not self._bindings_ready:
            return
        width = self.size.width or self.app.size.width
        self._laid_out_for = width
        shown, compact = fitting(self.items(), width)
        self.compact = compact
        yield from self._keys(shown)

    def _keys(self, shown: list[FooterItem]) -> Iterator[FooterKey]:
        for item in shown:
            yield FooterKey(
                item.binding.key,
                item.key_display,
                item.label,
                item.binding.action,
                disabled=not item.enabled,
                tooltip=item.tooltip,
            ).data_bind(compact=Footer.compact)

    def on_resize(self, event: events.Resize) -> None:
        if event.size.width != self._laid_out_for and self.is_attached:
            self.call_after_refresh(self.recompose)

    def refresh_labels(self) -> None:
        """The app's labels changed (attached, paused): lay the keys out again."""
        if self.is_attached:
            self.call_after_refresh(self.recompose)
