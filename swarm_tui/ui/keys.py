"""The keymap: every binding of the console has a stable id, and the config's `[keys]` moves any.

Ids are namespaced by where the binding applies (`app.*` everywhere, `grid.*`, `errorlog.*`,
`detail.*`, `confirm.*`, `help.*`, `provider.*`, `estimate.*`, `aggregate.*`). Textual applies
one keymap (`App.set_keymap`) to the bindings of every screen and widget in the binding chain,
so an id must be unique across them all. This module checks the user's `[keys]` against the
ids that exist (an unknown id is reported, naming the file, never dropped in silence), says
which binding a remapped key takes from another, and lists each binding with its key as bound
now for the help (`?`). It imports no screen: the app hands it the classes (`KEY_SCOPES`). The
bindings themselves, their ids and help texts, come from the actions table (`view/actions.py`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from textual.app import App
from textual.binding import Binding, BindingsMap, BindingType
from textual.dom import DOMNode
from textual.keys import _normalize_key_list, key_to_character

from swarm_tui.view.actions import BY_ID, CONCURRENCY, LEGACY_IDS, of_scope

__all__ = ["LEGACY_IDS", "KeyRow", "Keymap", "bindings_for", "help_rows", "key_hint", "resolve_keymap"]

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
    bindings = bound_keys(scope, getattr(app, "keymap", {})).get(binding_id)
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
