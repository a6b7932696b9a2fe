"""Modal dialogs: a yes/no confirmation (abort, quit during a run) and the help screen."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from swarm_tui.ui.keys import KeyRow, bindings_for, key_hint


class ConfirmScreen(ModalScreen[bool]):
    """A question with a destructive answer; `y`/Enter on the first button, `n`/Escape cancels
    (the buttons name the keys as bound now: `confirm.yes` and `confirm.no` may be remapped)."""

    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen > Vertical {
        width: 64; max-width: 95%; height: auto; border: thick $error; background: $surface; padding: 1 2;
    }
    ConfirmScreen #confirm-title { text-style: bold; color: $error; }
    ConfirmScreen #confirm-body { margin: 1 0; }
    ConfirmScreen Horizontal { height: auto; align-horizontal: right; }
    ConfirmScreen Button { margin-left: 2; }
    """

    BINDINGS: ClassVar[list[BindingType]] = bindings_for("confirm")

    def __init__(self, title: str, body: str, yes: str, no: str = "Cancel") -> None:
        super().__init__()
        self._title, self._body, self._yes, self._no = title, body, yes, no

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(self._title), id="confirm-title")
            yield Static(Text(self._body), id="confirm-body")
            with Horizontal():
                no, yes = (key_hint(self.app, ConfirmScreen, f"confirm.{answer}") for answer in ("no", "yes"))
                yield Button(f"{self._no} ({no})", id="no")
                yield Button(f"{self._yes} ({yes})", id="yes", variant="error")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


PANES = """\
Grid       a cell per agent, coloured by state, marked by its glyph:
           . queued  > running  ~ retrying  o done  x failed
           - cancelled  * in its tools  = in a batch  c from the cache
           ! scored low; the cursor's agent opens in full: prompt,
           answer, attempts; f makes the cursor follow the work.
Error log  a row per failed attempt: time, agent, error class, HTTP
           status, what became of it (retry in N s / retried / gave
           up), message. Tab moves focus there: Enter opens the row's
           agent, R retries it (the title says the cost), c shows one
           error class, u groups repeats.
Footer     cost (USD and your display currency), tokens in/out/cached,
           latency p50/p95/p99, req/s, tok/s, in flight / limit,
           done / failed / total, elapsed and ETA, latency sparkline."""

KEYS_INTRO = """\
Keys, by where they apply: the key as bound now, the binding's id, what
it does. Move any key in {config_path}:
  [keys]
  grid.open = "o"            # or several keys: ["o", "enter"]"""

NOTES = """\
Quitting during a run aborts it: in-flight calls are cancelled and
nothing finished is lost. The journal stays resumable:
  swarm-tui resume {run_dir}

Over SSH: start a long run headless, log out, watch it from anywhere:
  mkdir -p runs
  nohup swarm-tui run JOB --headless --out runs/big > runs/big.log 2>&1 &
  swarm-tui attach runs/big     the same screen, and it steers the run
Leaving an attached view (q: Detach) never stops the run; a run nobody
drives any more can be resumed from its attached view (p, or r)."""


class HelpScreen(ModalScreen[None]):
    """The panes, then every binding (`KEY_SCOPES` of the app) with its key as bound now, its
    id and what it does; what is wrong with the config's `[keys]` first of all."""

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 100; max-width: 100%; height: auto; max-height: 100%;
        border: thick $primary; background: $surface; padding: 0 1;
    }
    HelpScreen #help-title { text-style: bold; color: $primary; }
    HelpScreen #help-keymap-problems { color: $warning; margin-bottom: 1; }
    HelpScreen .help-scope { text-style: bold; color: $primary; margin-top: 1; }
    HelpScreen .help-block { margin-top: 1; }
    """

    BINDINGS: ClassVar[list[BindingType]] = bindings_for("help")

    def __init__(
        self,
        keys: list[tuple[str, list[KeyRow]]],
        run_dir: str,
        config_path: str = "the config file",
        problems: list[str] | None = None,
    ) -> None:
        super().__init__()
        self._keys = keys
        self._run_dir = run_dir
        self._config_path = config_path
        self._problems = problems or []

    def compose(self) -> ComposeResult:
        close = key_hint(self.app, HelpScreen, "help.close")
        rows = [row for _, scope_rows in self._keys for row in scope_rows]
        widths = (max((len(r.key) for r in rows), default=0), max((len(r.binding_id) for r in rows), default=0))
        with VerticalScroll():
            yield Static(Text(f"swarm-tui — keys and panes   ({close} closes)"), id="help-title")
            if self._problems:
                yield Static(Text("\n".join(self._problems)), id="help-keymap-problems")
            yield Static(Text(PANES))
            yield Static(Text(KEYS_INTRO.format(config_path=self._config_path)), classes="help-block")
            for where, scope_rows in self._keys:
                yield Static(Text(where), classes="help-scope")
                yield Static(key_table(scope_rows, *widths))
            yield Static(Text(NOTES.format(run_dir=self._run_dir)), classes="help-block")


KEYS_WIDTH = 10
"""The keys' column at most: `escape ? q` fits, `home ctrl+home` goes on two lines."""


def key_table(rows: list[KeyRow], key_width: int, id_width: int) -> Table:
    """Key, id, what it does: the description wraps in its column, an id never does (the same
    widths in every group, so that the columns line up down the help)."""
    table = Table.grid(padding=(0, 2), expand=True)
    table.add_column(width=min(key_width, KEYS_WIDTH))  # several keys wrap at their spaces
    table.add_column(no_wrap=True, width=id_width)
    table.add_column(ratio=1)
    for row in rows:
        table.add_row(Text(row.key, style="bold"), Text(row.binding_id), Text(row.does))
    return table
