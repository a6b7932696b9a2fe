"""The keymap: every binding of the console has a stable id, and the config's `[keys]` moves any.

Ids are namespaced by where the binding applies (`app.*` everywhere, `grid.*`, `errorlog.*`,
`detail.*`, `confirm.*`, `help.*`, `provider.*`, `estimate.*`, `aggregate.*`). Textual applies
one keymap (`App.set_keymap`) to the bindings of every screen and widget in the binding chain,
so an id must be unique across them all. This module checks the user's `[keys]` against the
ids that exist (an unknown id is reported, naming the file, never dropped in silence), says
which binding a remapped key takes from another, and lists each binding with its key as bound
now for the help (`?`). It imports no screen: the app hands it the classes (`KEY_SCOPES`). The
bindings themselves, their ids and help texts, come from the actions table (`view/actions.py`).

`KeyManager` is the app's part for its keys as the user has them: the keymap applied at mount
(its problems said), the key a hint names, the help's rows, the footer's keys refreshed when what
they may do changes (and only then: a refresh rebuilds the footer), and a word on a key that does
nothing now. Whether an action makes sense is the actions table's rule, asked through the app's
`check_action` (Textual asks it too), so a dimmed key and its explanation never disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from textual.app import App
from textual.binding import Binding, BindingsMap, BindingType
from textual.dom import DOMNode
from textual.keys import _normalize_key_list, key_to_character

from swarm_tui.view.actions import BY_ID, CONCURRENCY, FOOTER_LABELS, LEGACY_IDS, STEERED, of_scope

__all__ = [
    "LEGACY_IDS",
    "KeyManager",
    "KeyRow",
    "Keymap",
    "bindings_for",
    "help_rows",
    "key_hint",
    "resolve_keymap",
]

GROUPS = {CONCURRENCY: Binding.Group(CONCURRENCY, compact=True)}
"""The footer's groups of keys shown as one (`+-` for the concurrency ceiling's two)."""


def bindings_for(scope: str) -> list[BindingType]:
    """The bindings of one screen or widget (`app`, `grid`, `errorlog`, `detail`...), from the
    actions table (`view.actions`), in its order."""
    return [
        Binding(
            action.keys,
            action.action,
            action.label,
            show=action.show,
            key_display=action.key_display,
            priority=action.priority,
            tooltip=action.tooltip,
            id=action.id,
            group=GROUPS.get(action.group) if action.group else None,
        )
        for action in of_scope(scope)
    ]


def merged_bindings(node: type[DOMNode]) -> BindingsMap:
    """A class's bindings as Textual merges them (its own over those it inherits): the keys a
    remap may take from another binding. Textual has no public way to read them from a class."""
    return node._merge_bindings()  # noqa: SLF001


def own_bindings(node: type[DOMNode]) -> list[Binding]:
    """The bindings a class declares itself (not those it inherits), one per key."""
    return list(Binding.make_bindings(node.__dict__.get("BINDINGS", [])))


def binding_ids(node: type[DOMNode]) -> list[str]:
    """The ids of a class's own bindings, in the order it declares them."""
    return list(dict.fromkeys(b.id for b in own_bindings(node) if b.id))


@dataclass(frozen=True, slots=True)
class Keymap:
    """The config's `[keys]` checked against the bindings: what to give `App.set_keymap`, and
    what is wrong with it, said in full."""

    keymap: dict[str, str]
    problems: list[str]


def resolve_keymap(keys: Mapping[str, str], scopes: Iterable[type[DOMNode]], config_path: Path | str) -> Keymap:
    """The keymap of the config's `[keys]` (legacy ids renamed) and its problems: ids no binding
    has, an id given twice, and keys a remap takes from another binding of the same pane."""
    scopes = list(scopes)
    known = {binding_id for scope in scopes for binding_id in binding_ids(scope)}
    keymap: dict[str, str] = {}
    given_as: dict[str, str] = {}
    problems: list[str] = []
    unknown: list[str] = []
    for given, key in keys.items():
        binding_id = given if given in known else LEGACY_IDS.get(given, given)
        if binding_id not in known:
            unknown.append(given)
            continue
        if binding_id in keymap:
            problems.append(
                f"{config_path}: [keys] sets {binding_id} twice ({given_as[binding_id]} and {given}); {key!r} is used"
            )
        keymap[binding_id] = key
        given_as[binding_id] = given
    if unknown:
        problems.append(
            f"{config_path}: [keys] has no binding {', '.join(sorted(unknown))} "
            "(? lists every binding id; nothing was remapped for these)"
        )
    normalized = {binding_id: _normalize_key_list(key) for binding_id, key in keymap.items()}
    for scope in scopes:
        problems.extend(f"{config_path}: [keys] {clash}" for clash in clashes(scope, normalized, given_as))
    return Keymap(normalized, problems)


def clashes(scope: type[DOMNode], keymap: Mapping[str, str], given_as: Mapping[str, str]) -> list[str]:
    """Keys a remap takes from another binding of the same class (Textual then drops that
    binding from the key), and keys two remaps both claim."""
    before = merged_bindings(scope).key_to_bindings
    after = bound_keys(scope, keymap)
    on_key: dict[str, list[str]] = {}
    for binding_id, bindings in after.items():
        if binding_id in keymap:
            for binding in bindings:  # a binding of several keys is one per key: each moved
                takers = on_key.setdefault(binding.key, [])
                if binding_id not in takers:
                    takers.append(binding_id)
    found: list[str] = []
    for key, takers in on_key.items():
        if len(takers) > 1:
            found.append(f"{' and '.join(given_as[t] for t in takers)} share the key {key}: only one of them works")
        for lost in before.get(key, []):
            if lost.id in keymap or lost.id in takers:
                continue  # moved elsewhere itself, or the taker's own old key
            owner = lost.id or f"Textual's {lost.action}"
            keyless = bool(lost.id) and not after.get(lost.id or "")
            found.append(
                f"{given_as[takers[0]]} = {keymap[takers[0]]!r} takes {key} from {owner}"
                + (", which has no key now" if keyless else "")
            )
    return found


def bound_keys(node: type[DOMNode], keymap: Mapping[str, str]) -> dict[str, list[Binding]]:
    """id -> the bindings of that id as they are with `keymap` applied (one per key). Cached:
    hints ask for it at every repaint of a panel."""
    return _bound_keys(node, tuple(sorted(keymap.items())))


@lru_cache(maxsize=256)
def _bound_keys(node: type[DOMNode], keymap: tuple[tuple[str, str], ...]) -> dict[str, list[Binding]]:
    bindings = merged_bindings(node)
    if keymap:
        bindings.apply_keymap(dict(keymap))
    found: dict[str, list[Binding]] = {}
    for _, binding in bindings:
        if binding.id:
            found.setdefault(binding.id, []).append(binding)
    return found


def key_name(key: str) -> str:
    """A key as the help and the hints write it: the character when it prints (`?`, `$`, `R`),
    else Textual's name (`escape`, `ctrl+s`, `pageup`); both are what `[keys]` takes."""
    char = key_to_character(key)
    if char is not None and char.isprintable() and not char.isspace():
        return char
    return {"plus": "+", "minus": "-"}.get(key, key)


def keys_text(bindings: Iterable[Binding]) -> str:
    """The keys of one binding, space-separated; `(none)` when a remap took its only key."""
    return " ".join(dict.fromkeys(key_name(binding.key) for binding in bindings)) or "(none)"


def key_hint(app: App[Any], scope: type[DOMNode], binding_id: str) -> str:
    """The key to name in a hint about a binding of `scope` (its first, as bound now)."""
    return hint_in(getattr(app, "keymap", {}), scope, binding_id)


def hint_in(keymap: Mapping[str, str], scope: type[DOMNode], binding_id: str) -> str:
    """The key to name in a hint about a binding of `scope` with `keymap` applied."""
    bindings = bound_keys(scope, keymap).get(binding_id)
    return key_name(bindings[0].key) if bindings else "(no key)"


@dataclass(frozen=True, slots=True)
class KeyRow:
    key: str
    """The keys as bound now, as the footer writes them."""
    binding_id: str
    does: str


def help_rows(scope: type[DOMNode], keymap: Mapping[str, str]) -> list[KeyRow]:
    """Every binding of `scope` with an id: its keys as bound now and what it does."""
    bound = bound_keys(scope, keymap)
    described = {b.id: b.tooltip or b.description for b in own_bindings(scope) if b.id}
    return [
        KeyRow(keys_text(bound.get(binding_id, [])), binding_id, _help_of(binding_id, described[binding_id]))
        for binding_id in binding_ids(scope)
    ]


def _help_of(binding_id: str, described: str) -> str:
    action = BY_ID.get(binding_id)
    return action.help if action is not None else described


class KeyManager:
    """The app's keys as the user has them (see the module's notes)."""

    def __init__(
        self,
        app: App[Any],
        scopes: Sequence[tuple[str, type[DOMNode]]],
        keys: Mapping[str, str],
        config_path: Path,
        *,
        why_not: Callable[[str], str | None],
        label_now: Callable[[str], str | None],
    ) -> None:
        """`scopes`: where bindings apply, as the help groups them (the app's `KEY_SCOPES`);
        `keys`: the config's `[keys]`; `why_not` and `label_now`: the actions table's reason an
        action does nothing now and a key's footer label now, as the app answers them."""
        self._app = app
        self._scopes = scopes
        self._keys = keys
        self._config_path = config_path
        self._why_not = why_not
        self._label_now = label_now
        self.keymap: dict[str, str] = {}
        """The config's `[keys]` as applied: binding id -> keys (Textual's names, comma-separated)."""
        self.problems: list[str] = []
        """What is wrong with the config's `[keys]`, as said at mount (the help lists it again)."""
        self._shown: tuple[object, ...] = ()
        """The steered actions' enabled states and the footer's labels, as the footer last showed them."""

    def apply(self) -> None:
        """The config's `[keys]` (binding id -> key) over every binding of every screen and
        widget; what is wrong with it (an unknown id, a key taken from another binding) is said,
        naming the file, and listed again at the top of the help."""
        app = self._app
        resolved = resolve_keymap(self._keys, [scope for _, scope in self._scopes], self._config_path)
        self.keymap = resolved.keymap
        self.problems = resolved.problems
        if resolved.problems:
            app.notify("\n".join(resolved.problems), title="Keys", severity="warning", timeout=20, markup=False)
        palette = self.keymap.get("app.palette")
        if palette:  # the footer shows the palette's key by this name
            app.COMMAND_PALETTE_BINDING = palette.split(",")[0]  # type: ignore[misc]
        if self.keymap:
            app.set_keymap(self.keymap)

    def hint(self, binding_id: str) -> str:
        """The key to name in a hint (a notification, the palette) for one of the app's bindings, as bound now."""
        return hint_in(self.keymap, type(self._app), binding_id)

    def help(self) -> list[tuple[str, list[KeyRow]]]:
        """Every binding with an id, grouped by where it applies: its keys as bound now (the
        keymap may have moved them), its id, what it does."""
        return [(where, help_rows(scope, self.keymap)) for where, scope in self._scopes]

    def refresh_if_changed(self) -> None:
        """Refresh the keys (enabled, and their labels) only when they changed: a refresh rebuilds the footer."""
        app = self._app
        enabled = tuple(app.check_action(action.name, action.parameters) for action in STEERED)
        labels = tuple(self._label_now(binding_id) for binding_id in FOOTER_LABELS)
        if (enabled, labels) != self._shown:
            self._shown = (enabled, labels)
            app.refresh_bindings()

    def explain(self, key: str) -> bool:
        """A key no binding took: if it is bound to an action that makes no sense now, say why
        (a hidden or dimmed key otherwise does nothing visible). True when it was explained."""
        app = self._app
        bindings = merged_bindings(type(app))
        if self.keymap:
            bindings.apply_keymap(self.keymap)
        for binding in bindings.key_to_bindings.get(key, []):
            base, _, _ = binding.action.partition("(")
            if app.check_action(base, ()) is not True and (reason := self._why_not(base)):
                app.notify(reason, timeout=5, markup=False)
                return True
        return False
