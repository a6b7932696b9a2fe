"""Modal dialogs: a yes/no confirmation (abort, quit during a run) and the help screen."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class ConfirmScreen(ModalScreen[bool]):
    """A question with a destructive answer; `y`/Enter on the first button, `n`/Escape cancels."""

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

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes", id="confirm.yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm.no"),
    ]

    def __init__(self, title: str, body: str, yes: str, no: str = "Cancel") -> None:
        super().__init__()
        self._title, self._body, self._yes, self._no = title, body, yes, no

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(self._title), id="confirm-title")
            yield Static(Text(self._body), id="confirm-body")
            with Horizontal():
                yield Button(f"{self._no} (n)", id="no")
                yield Button(f"{self._yes} (y)", id="yes", variant="error")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


HELP = """\
Grid       a cell per agent, coloured by state (legend beside it).
           Arrows move; Enter opens the agent: prompt, answer, attempts.
Error log  a row per failed attempt: time, agent, error class, HTTP
           status, what happens next (retry in N s / gave up), message.
           Tab moves focus there; Enter on a row retries that agent.
Footer     cost (USD and your display currency), tokens in/out/cached,
           latency p50/p95/p99, req/s, tok/s, in flight / limit,
           done / failed / total, elapsed and ETA, latency sparkline.

Keys
{keys}

Quitting during a run aborts it: in-flight calls are cancelled and
nothing finished is lost. The journal stays resumable:
  swarm-tui resume {run_dir}

Over SSH: start a long run headless, detach, watch it from anywhere:
  nohup swarm-tui run JOB --headless --out runs/big &   (or in tmux)
  swarm-tui attach runs/big     the same screen; r p a + - steer it
Leaving an attached view (q) never stops the run.
"""


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 78; max-width: 100%; height: auto; max-height: 100%;
        border: thick $primary; background: $surface; padding: 0 1;
    }
    HelpScreen #help-title { text-style: bold; color: $primary; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "app.pop_screen", "Close", id="help.close"),
    ]

    def __init__(self, keys: list[tuple[str, str]], run_dir: str) -> None:
        super().__init__()
        self._keys = keys
        self._run_dir = run_dir

    def compose(self) -> ComposeResult:
        keys = "\n".join(f"  {key:<7} {description}" for key, description in self._keys)
        with VerticalScroll():
            yield Static(Text("swarm-tui — keys and panes   (Esc closes)"), id="help-title")
            yield Static(Text(HELP.format(keys=keys, run_dir=self._run_dir)))
