"""Every action of the console, in one table: its binding id, keys, label, help text, place in
the command palette, when it makes sense and, when it does not, why. No Textual.

From this table `ui/keys.py` makes each screen's and widget's bindings (the ids a user remaps in
the config's `[keys]`, old ids included), the help (`?`) lists them, the command palette
(`ui/commands.py`) offers the app's actions by name, and the console (`ui/app.py`, its
`KeyManager`) dims a key, relabels it ("Detach", "Resume") or says why it does nothing, by the
same rules: a new action is one row here and one `action_*` method on the app, handing over to
the part that does it (`ui/steering.py` for most).

The rules (`enabled`, `why_not`, `label_now`: `rules.py`) are the app's: they read the run
source and the screen's state through `rules.Now`. A screen's own key whose sense depends on that screen (the
detail's `r`: the agent it shows) keeps its rule on the screen.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from swarm_tui.view.rules import (
    Label,
    Now,
    Reason,
    Rule,
    abort,
    aggregate,
    aggregate_why_not,
    cancel_cursor,
    concurrency,
    flush_memory,
    flush_memory_why_not,
    pause_label,
    quit_label,
    retry_cursor,
    retry_cursor_why_not,
    retry_failed,
    toggle_pause,
)

DEFAULT_RANK = 3
"""How long a key stays in a short footer (0 stays longest)."""


@dataclass(frozen=True, slots=True)
class Palette:
    """An action's entry in the command palette."""

    name: str
    does: str
    order: int
    """Where it comes in the palette's list (the bindings' order is the footer's and the help's)."""


@dataclass(frozen=True, slots=True)
class Action:
    id: str
    """The binding id (`scope.name`), what the config's `[keys]` remaps."""
    keys: str
    """Textual's key names, comma-separated."""
    action: str
    """The action it runs, with its parameters (`concurrency(1)`)."""
    label: str
    help: str
    """What it does, as the help (`?`) says it."""
    show: bool = True
    """In the footer."""
    key_display: str | None = None
    tooltip: str = ""
    group: str | None = None
    """Shown as one key with the others of its group (`+-`)."""
    priority: bool = False
    rank: int = DEFAULT_RANK
    legacy_id: str | None = None
    """Its id before ids were namespaced (`retry-failed`): a config that names it still works."""
    palette: Palette | None = None
    enabled: Rule | None = None
    why_not: Reason | None = None
    label_now: Label | None = None
    """Its footer label as things are now (None: `label`)."""

    @property
    def scope(self) -> str:
        return self.id.partition(".")[0]

    @property
    def name(self) -> str:
        """The action without its parameters (what `check_action` is asked about)."""
        return self.action.partition("(")[0]

    @property
    def parameters(self) -> tuple[object, ...]:
        _, _, args = self.action.partition("(")
        return (int(args.rstrip(")")),) if args else ()


# ----------------------------------------------------------------- the table

CONCURRENCY = "Limit"
UNDER_CEILING = "the adaptive limit works under it"

ACTIONS: tuple[Action, ...] = (
    # The app's: everywhere (a pane with focus may take the same key).
    Action(
        "app.retry_failed",
        "r",
        "retry_failed",
        "Retry",
        "retry every failed agent (they restart at once; attached to a run nobody drives: resume it)",
        tooltip="retry every failed agent",
        rank=1,
        legacy_id="retry-failed",
        palette=Palette("Retry failed agents", "queue every failed agent again", 0),
        enabled=retry_failed,
    ),
    Action(
        "app.retry_agent",
        "R",
        "retry_cursor",
        "Retry agent",
        "retry the failed (or cancelled) agent under the grid cursor",
        show=False,
        legacy_id="retry-agent",
        palette=Palette("Retry the agent under the cursor", "queue the failed agent under the grid cursor", 1),
        enabled=retry_cursor,
        why_not=retry_cursor_why_not,
    ),
    Action(
        "app.cancel_agent",
        "x",
        "cancel_cursor",
        "Cancel agent",
        "cancel the agent under the grid cursor (R starts it again)",
        show=False,
        enabled=cancel_cursor,
    ),
    Action(
        "app.pause",
        "p",
        "toggle_pause",
        "Pause",
        "pause dispatch (in-flight calls finish) / resume; a run nobody drives (attached): resume it",
        tooltip="pause / resume dispatch",
        rank=1,
        legacy_id="pause",
        palette=Palette("Pause / resume the run", "pause dispatch (in-flight calls finish), or resume", 2),
        enabled=toggle_pause,
        label_now=pause_label,
    ),
    Action(
        "app.abort",
        "a",
        "abort",
        "Abort",
        "abort the run (asks first); the journal stays resumable",
        rank=2,
        legacy_id="abort",
        palette=Palette("Abort the run", "cancel in-flight calls; the journal stays resumable", 3),
        enabled=abort,
    ),
    Action(
        "app.concurrency_up",
        "plus,equals_sign",
        "concurrency(1)",
        "More",
        "raise the ceiling (the adaptive limit works under it)",
        key_display="+",
        group=CONCURRENCY,
        rank=4,
        legacy_id="concurrency-up",
        palette=Palette("Raise the concurrency ceiling", UNDER_CEILING, 4),
        enabled=concurrency,
    ),
    Action(
        "app.concurrency_down",
        "minus",
        "concurrency(-1)",
        "Less",
        "lower the ceiling (the adaptive limit works under it)",
        key_display="-",
        group=CONCURRENCY,
        rank=4,
        legacy_id="concurrency-down",
        palette=Palette("Lower the concurrency ceiling", UNDER_CEILING, 5),
        enabled=concurrency,
    ),
    Action(
        "app.follow",
        "f",
        "follow",
        "Follow",
        "follow: the cursor goes with the first agent in flight, then with each failure, then stays",
        show=False,
        rank=5,
    ),
    Action(
        "app.theme",
        "t",
        "cycle_theme",
        "Theme",
        "next theme: swarm-dark, swarm-light, swarm-high-contrast (remembered in the config)",
        rank=6,
        legacy_id="theme",
        palette=Palette("Next theme", "swarm-dark, swarm-light, swarm-high-contrast...", 6),
    ),
    Action(
        "app.heat",
        "h",
        "toggle_heat",
        "Heat view",
        "latency heat view: colour agents by latency",
        show=False,
        legacy_id="heat",
        palette=Palette("Toggle the latency heat view", "colour agents by latency instead of state", 7),
    ),
    Action(
        "app.provider",
        "e",
        "provider",
        "Provider",
        "provider pane: profiles, edit, save, test connection",
        rank=5,
        legacy_id="provider",
        palette=Palette("Provider pane", "profiles: edit, save, test connection", 8),
    ),
    Action(
        "app.aggregate",
        "g",
        "aggregate",
        "Aggregate",
        "the aggregate: what the swarm's aggregator wrote (aggregate.md)",
        tooltip="what the aggregator wrote",
        rank=5,
        legacy_id="aggregate",
        palette=Palette("Aggregate", "what the swarm's aggregator wrote", 10),
        enabled=aggregate,
        why_not=aggregate_why_not,
    ),
    Action(
        "app.estimate",
        "dollar_sign",
        "estimate",
        "Cost projection",
        "monthly cost projection of this run's tokens per task, on every priced model",
        show=False,
        key_display="$",
        legacy_id="estimate",
        palette=Palette("Cost projection", "this run's tokens per task priced per month on every model", 9),
    ),
    Action(
        "app.flush_memory",
        "m",
        "flush_memory",
        "Flush memory",
        "flush the swarm's rolling memory: later rounds start from the shared context only",
        show=False,
        legacy_id="flush-memory",
        palette=Palette("Flush the rolling memory", "later rounds start from the shared context only", 11),
        enabled=flush_memory,
        why_not=flush_memory_why_not,
    ),
    Action(
        "app.report",
        "w",
        "report",
        "Report",
        "write the run's report (report.html in the run directory: charts, errors, settings; sends nothing)",
        show=False,
        palette=Palette("Write the run's report", "one HTML file of the run so far: charts, errors, settings", 12),
    ),
    Action(
        "app.help",
        "question_mark",
        "help",
        "Help",
        "this help",
        key_display="?",
        rank=0,
        legacy_id="help",
        palette=Palette("Help", "keys, panes, monitoring over SSH", 13),
    ),
    Action(
        "app.quit",
        "q",
        "quit",
        "Quit",
        "quit (a run in flight is aborted after you confirm); an attached view detaches",
        rank=0,
        legacy_id="quit",
        palette=Palette("Quit", "leave; a run in flight is aborted, the journal stays resumable", 14),
        label_now=quit_label,
    ),
    Action(  # Textual's own palette binding, with an id (Textual adds none when one exists)
        "app.palette",
        "ctrl+p",
        "command_palette",
        "palette",
        "command palette: every action by name; 'agent 42' opens one",
        show=False,
        tooltip="Open the command palette",
        priority=True,
        rank=7,
    ),
    # The grid (when it has focus): its keys are its own, not a scroll view's.
    Action("grid.cursor_left", "left", "move(-1, 0)", "left", "cursor one agent left", show=False),
    Action("grid.cursor_right", "right", "move(1, 0)", "right", "cursor one agent right", show=False),
    Action("grid.cursor_up", "up", "move(0, -1)", "up", "cursor one row up", show=False),
    Action("grid.cursor_down", "down", "move(0, 1)", "down", "cursor one row down", show=False),
    Action("grid.first", "home", "jump('first')", "first", "cursor to the first agent", show=False),
    Action("grid.last", "end", "jump('last')", "last", "cursor to the last agent", show=False),
    Action("grid.page_up", "pageup", "move(0, -10)", "page up", "cursor ten rows up", show=False),
    Action("grid.page_down", "pagedown", "move(0, 10)", "page down", "cursor ten rows down", show=False),
    Action(
        "grid.open",
        "enter",
        "open",
        "Detail",
        "open the agent under the cursor: prompt, answer, every attempt",
        show=False,
    ),
    # The error log (when it has focus: Tab).
    Action("errorlog.cursor_up", "up", "cursor_up", "Cursor up", "previous row", show=False),
    Action("errorlog.cursor_down", "down", "cursor_down", "Cursor down", "next row", show=False),
    Action("errorlog.page_up", "pageup", "page_up", "Page up", "a page of rows up", show=False),
    Action("errorlog.page_down", "pagedown", "page_down", "Page down", "a page of rows down", show=False),
    Action("errorlog.first", "home,ctrl+home", "scroll_top", "First", "first (oldest) row", show=False),
    Action("errorlog.last", "end,ctrl+end", "scroll_bottom", "Last", "last (newest) row", show=False),
    Action(
        "errorlog.open",
        "enter",
        "select_cursor",
        "Detail",
        "open the row's agent: every attempt, the full message (sends nothing)",
        rank=1,
    ),
    Action(
        "errorlog.retry",
        "R",
        "retry_row",
        "Retry row",
        "retry the row's agent (a group's: every failed one); the log's title says what it costs",
        rank=1,
    ),
    Action(
        "errorlog.filter", "c", "cycle_class", "Class", "show one error class, then the next (then every class)", rank=4
    ),
    Action(
        "errorlog.group",
        "u",
        "toggle_group",
        "Group",
        "group repeats: the same class, status and message in one row, counted",
        rank=4,
    ),
    # An agent's detail (opened from the grid or the error log).
    Action("detail.back", "escape", "app.pop_screen", "Back", "back to the grid", rank=0),
    Action("detail.retry", "r", "retry_agent", "Retry this agent", "retry this agent (when it failed)", rank=1),
    Action("detail.prev", "left,comma", "step(-1)", "Prev", "previous agent"),
    Action("detail.next", "right,full_stop", "step(1)", "Next", "next agent"),
    # Confirmations, the help and the other panes.
    Action("confirm.yes", "y", "answer(True)", "Yes", "yes: do it (abort, quit)"),
    Action("confirm.no", "n,escape", "answer(False)", "No", "no: cancel"),
    Action("help.close", "escape,question_mark,q", "app.pop_screen", "Close", "close this help"),
    Action("provider.close", "escape", "app.pop_screen", "Close", "close the provider pane"),
    Action("provider.save", "ctrl+s", "save", "Save", "save the profile to the config file"),
    Action("provider.test", "ctrl+t", "probe", "Test connection", "test the connection with the profile as edited"),
    Action("estimate.back", "escape,dollar_sign,q", "app.pop_screen", "Back", "back to the grid", rank=0),
    Action("aggregate.back", "escape,g,q", "app.pop_screen", "Back", "back to the grid", rank=0),
)
"""Every action, by where it applies, in the order its bindings are declared (the footer's and
the help's order)."""

BY_ID = {action.id: action for action in ACTIONS}
LEGACY_IDS = {action.legacy_id: action.id for action in ACTIONS if action.legacy_id}
"""The App's ids before they were namespaced (`help`, `retry-failed`...): a config with them still works."""


def of_scope(scope: str) -> tuple[Action, ...]:
    """The actions of one screen or widget (`app`, `grid`, `errorlog`, `detail`...)."""
    return tuple(action for action in ACTIONS if action.scope == scope)


def palette() -> list[Action]:
    """The app's actions the command palette offers, in its order."""
    offered = [action for action in ACTIONS if action.palette is not None]
    return sorted(offered, key=lambda action: action.palette.order if action.palette else 0)


def steering() -> Iterator[Action]:
    """The app's actions whose sense changes with the run (one per action name): the footer
    refreshes its keys when one of these changes."""
    seen: set[str] = set()
    for action in of_scope("app"):
        if action.enabled is not None and action.name not in seen:
            seen.add(action.name)
            yield action


STEERED: tuple[Action, ...] = tuple(steering())
"""`steering()`, once."""
RULES: dict[str, Action] = {action.name: action for action in STEERED}
"""The app's actions with a rule, by action name (`check_action` is asked by name)."""


def enabled(action_name: str, now: Now) -> bool | None:
    """Whether the app's action makes sense now (True for an action without a rule)."""
    action = RULES.get(action_name)
    return True if action is None or action.enabled is None else action.enabled(now)


def why_not(action_name: str, now: Now) -> str | None:
    """Why the app's action does nothing now (None: no reason to give)."""
    action = RULES.get(action_name)
    return action.why_not(now) if action is not None and action.why_not is not None else None


def label_now(binding_id: str, now: Now) -> str | None:
    """A key's footer label as things are now (None: its own)."""
    action = BY_ID.get(binding_id)
    return action.label_now(now) if action is not None and action.label_now is not None else None


FOOTER_LABELS = tuple(action.id for action in ACTIONS if action.label_now is not None)
"""The bindings whose footer label may change with the run."""
