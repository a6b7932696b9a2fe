"""The provider pane: choose a profile, see and edit where requests go, save it, test it.

A profile holds the *name* of the env var with the key; the pane shows whether it is set,
never the key. Saving writes the config file with tomli-w (`Config.save_profile`); a saved
profile is used by the next run (`swarm-tui run --provider NAME`); the current run keeps its
endpoint. "Test connection" sends one `max_tokens=1` call and shows its latency.

A value the profile refuses (`ProviderProfile.problem`: a key pasted where the env var's name
belongs, a URL carrying credentials) is a field error: the field is marked, the message says
what is expected without repeating the value, and nothing is saved. A key pasted into a key
env var or URL field is masked at once, so it does not stay on screen.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.events import Key
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Static

from swarm_tui.config import Config
from swarm_tui.providers.probe import probe_profile
from swarm_tui.providers.profile import (
    SIM_PROFILE_NAME,
    ProviderProfile,
    env_name_problem,
    has_credentials,
    key_status,
    looks_like_key,
)
from swarm_tui.ui.keys import bindings_for, key_hint

if TYPE_CHECKING:
    from swarm_tui.frontend.source import RunSource

TEXT_FIELDS = ("base_url", "model", "api_key_env", "fallback_base_url", "fallback_model")
NUMBER_FIELDS = {"concurrency": int, "rpm": int, "tpm": int, "timeout": float}
PLACEHOLDERS = {
    "base_url": "empty: the embedded simulator",
    "model": "empty: as each request says",
    "api_key_env": "OPENAI_API_KEY",
    "concurrency": "50",
    "rpm": "learned from headers",
    "tpm": "learned from headers",
    "timeout": "60",
    "fallback_base_url": "none",
    "fallback_model": "same model",
}
LABELS = {
    "base_url": "base URL",
    "model": "model",
    "api_key_env": "key env var",
    "concurrency": "concurrency",
    "rpm": "RPM",
    "tpm": "TPM",
    "timeout": "timeout s",
    "fallback_base_url": "fallback URL",
    "fallback_model": "fallback model",
}


def holds_secret(input_id: str, value: str) -> bool:
    """Whether the form field `input_id` (`f-<field>`) holds what looks like a key, to be masked."""
    field = input_id.removeprefix("f-")
    if field in ("api_key_env", "fallback_api_key_env"):
        return looks_like_key(value)
    if field in ("base_url", "fallback_base_url"):
        return has_credentials(value)
    return False


class FieldError(ValueError):
    """A form value that is wrong, with the field it belongs to (`field` is a profile field or `name`)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{LABELS.get(field, field)}: {message}")
        self.field = field


def profile_from_form(name: str, values: dict[str, str], base: ProviderProfile) -> ProviderProfile:
    """The profile the form describes; raises FieldError (a ValueError) naming the field when a value is wrong."""
    changes: dict[str, Any] = {}
    for key in TEXT_FIELDS:
        changes[key] = values.get(key, "").strip() or (None if key != "base_url" else "")
    for key, kind in NUMBER_FIELDS.items():
        raw = values.get(key, "").strip()
        try:
            changes[key] = kind(raw) if raw else None
        except ValueError:
            raise FieldError(key, f"not a number: {raw!r}") from None
    profile = replace(base, name=name.strip(), **changes)
    if not profile.name:
        raise FieldError("name", "a profile needs a name")
    problem = profile.problem()
    if problem:
        raise FieldError(*problem)
    return profile


class ProviderScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    ProviderScreen { align: center middle; }
    ProviderScreen > Vertical {
        width: 78; max-width: 100%; height: auto; max-height: 100%;
        border: thick $primary; background: $surface; padding: 0 1;
    }
    ProviderScreen #provider-title { text-style: bold; color: $primary; }
    ProviderScreen VerticalScroll { height: auto; max-height: 18; }
    ProviderScreen .row { height: 1; margin-bottom: 0; }
    ProviderScreen .row Label { width: 15; color: $text-muted; }
    ProviderScreen .row Input { width: 1fr; }
    ProviderScreen .row Input.field-error { background: $error 30%; }
    ProviderScreen .row Input:focus { background: $boost; text-style: bold; }
    ProviderScreen .row:focus-within Label { color: $accent; text-style: bold; }
    ProviderScreen Select:focus > SelectCurrent { background: $accent 40%; }
    ProviderScreen Button:focus { text-style: bold reverse; }
    ProviderScreen .row Input > .input--placeholder { color: $text-muted; }
    ProviderScreen #simulated { color: $background; background: $swarm-simulated; text-style: bold; padding: 0 1; }
    ProviderScreen #key-status { height: 1; color: $text-muted; }
    ProviderScreen #key-status.-bad { color: $error; }
    ProviderScreen #probe-result { height: auto; min-height: 1; }
    ProviderScreen #buttons { height: 1; margin-top: 1; }
    ProviderScreen Button { min-width: 10; margin-right: 1; }
    """

    BINDINGS: ClassVar[list[BindingType]] = bindings_for("provider")

    def __init__(self, config: Config, source: RunSource) -> None:
        super().__init__()
        self.config = config
        self.source = source
        current = source.profile.name
        self._profiles = dict(config.profiles)
        if current not in self._profiles:  # an ad hoc --base-url profile of this run
            self._profiles[current] = source.profile
        self._selected = current
        self._new = False
        """The form is a new profile's (`new_profile`), not the selected one's."""

    def compose(self) -> ComposeResult:
        with Vertical():
            close, save, test = (key_hint(self.app, ProviderScreen, f"provider.{b}") for b in ("close", "save", "test"))
            yield Static(
                Text(f"Provider profiles   ({close} closes · {save} saves · {test} tests)"), id="provider-title"
            )
            yield Select(
                [(name, name) for name in sorted(self._profiles)],
                value=self._selected,
                allow_blank=False,
                compact=True,
                id="profile-select",
            )
            yield Static("SIMULATED: the embedded simulator — no key, no network, not a real model.", id="simulated")
            with VerticalScroll(can_focus=False):  # Tab goes from field to field
                with Horizontal(classes="row"):
                    yield Label("name")
                    yield Input(id="f-name", compact=True)
                for key in (*TEXT_FIELDS[:3], *NUMBER_FIELDS, *TEXT_FIELDS[3:]):
                    with Horizontal(classes="row"):
                        yield Label(LABELS[key])
                        yield Input(
                            id=f"f-{key}",
                            compact=True,
                            placeholder=PLACEHOLDERS[key],
                            type="integer"
                            if NUMBER_FIELDS.get(key) is int
                            else ("number" if key in NUMBER_FIELDS else "text"),
                        )
                yield Static(id="key-status", markup=False)
            yield Static(id="probe-result", markup=False)
            with Horizontal(id="buttons"):
                yield Button("Test connection", id="probe", compact=True, variant="primary")
                yield Button("Save", id="save", compact=True, variant="success")
                yield Button("New profile", id="new", compact=True)
                yield Button("Close", id="close", compact=True)

    def on_mount(self) -> None:
        self._load(self._selected)
        self.query_one("#f-name", Input).focus()  # a form's first field, where typing goes

    def on_key(self, event: Key) -> None:
        """A printable key no field took (the focus on the profile list or a button) stays in the
        pane: the app's own letters (`m` flushes the memory, `q` quits) must not fire under a form
        one is typing into."""
        if not event.is_printable:
            return
        taken = self.active_bindings.get(event.key)
        if taken is None or taken.node is self.app:  # (the list's own space, a button's: theirs)
            event.stop()
            event.prevent_default()

    def _load(self, name: str) -> None:
        profile = self._profiles[name]
        self._selected = name
        self.query_one("#f-name", Input).value = profile.name
        for key in (*TEXT_FIELDS, *NUMBER_FIELDS):
            value = getattr(profile, key)
            self.query_one(f"#f-{key}", Input).value = "" if value is None else str(value)
        self._new = False
        self._show_simulated(profile.name, profile.base_url)
        self._show_key_status(profile)
        note = "the profile of this run" if name == self.source.profile.name else ""
        self.query_one("#probe-result", Static).update(Text(note))

    def _show_simulated(self, name: str, base_url: str) -> None:
        """The SIMULATED banner while the form describes the embedded simulator (the `sim` profile
        with no URL), and only then: a real URL typed in takes it away."""
        self.query_one("#simulated").display = name.strip() == SIM_PROFILE_NAME and not base_url.strip()

    def new_profile(self) -> None:
        """A blank form for a profile of its own, saved under the name given."""
        self._new = True
        self.query_one("#f-name", Input).value = ""
        for key in (*TEXT_FIELDS, *NUMBER_FIELDS):
            self.query_one(f"#f-{key}", Input).value = ""
        self._mark_field(None)
        self._show_simulated("", "")
        self._show_key_status(ProviderProfile(name="new"))
        self.query_one("#probe-result", Static).update(Text("a new profile: give it a name, a base URL and a model"))
        self.query_one("#f-name", Input).focus()

    def _show_key_status(self, profile: ProviderProfile) -> None:
        env = profile.api_key_env or "OPENAI_API_KEY"
        problem = env_name_problem(env)
        status = self.query_one("#key-status", Static)
        status.set_class(problem is not None, "-bad")
        status.update(
            Text(
                f"key env var: {problem}"
                if problem  # never what was typed: it may be the key
                else f"key: ${env} {key_status(profile)} (never shown, never saved)"
            )
        )

    def _mark_field(self, field: str | None) -> None:
        """Flag the form's field `field` as wrong (None: no field is wrong)."""
        for input_ in self.query(".row Input").results(Input):
            input_.set_class(input_.id == f"f-{field}", "field-error")

    def _refuse(self, verb: str, exc: ValueError) -> None:
        field = exc.field if isinstance(exc, FieldError) else None
        self._mark_field(field)
        if field is not None:
            self.query_one(f"#f-{field}", Input).focus()
        self.query_one("#probe-result", Static).update(Text(f"{verb}: {exc}"))

    def _form_profile(self) -> ProviderProfile:
        values = {key: self.query_one(f"#f-{key}", Input).value for key in (*TEXT_FIELDS, *NUMBER_FIELDS)}
        base = ProviderProfile(name="new") if self._new else self._profiles[self._selected]
        return profile_from_form(self.query_one("#f-name", Input).value, values, base)

    @on(Select.Changed, "#profile-select")
    def _profile_chosen(self, event: Select.Changed) -> None:
        if isinstance(event.value, str) and event.value != self._selected:
            self._load(event.value)

    @on(Input.Changed, "#f-api_key_env")
    def _key_env_changed(self, event: Input.Changed) -> None:
        profile = self._profiles[self._selected]
        self._show_key_status(replace(profile, api_key_env=event.value.strip() or None))

    @on(Input.Changed, "#f-name, #f-base_url")
    def _where_edited(self, event: Input.Changed) -> None:
        self._show_simulated(self.query_one("#f-name", Input).value, self.query_one("#f-base_url", Input).value)

    @on(Input.Changed, ".row Input")
    def _field_edited(self, event: Input.Changed) -> None:
        event.input.remove_class("field-error")
        event.input.password = holds_secret(event.input.id or "", event.value)  # a pasted key leaves the screen

    @on(Button.Pressed)
    def _button(self, event: Button.Pressed) -> None:
        match event.button.id:
            case "probe":
                self.action_probe()
            case "save":
                self.action_save()
            case "new":
                self.new_profile()
            case "close":
                self.app.pop_screen()

    def action_save(self) -> None:
        result = self.query_one("#probe-result", Static)
        try:
            profile = self._form_profile()
        except ValueError as exc:
            self._refuse("not saved", exc)
            return
        self._mark_field(None)
        try:
            self.config.save_profile(profile)
        except Exception as exc:  # OSError, InputError and friends: say it, never crash the run
            result.update(Text(f"not saved: {exc}"))
            return
        self._profiles[profile.name] = profile
        self._new = False
        select = self.query_one("#profile-select", Select)
        with select.prevent(Select.Changed):  # the form stays as saved, its message with it
            select.set_options([(name, name) for name in sorted(self._profiles)])
            select.value = profile.name
        self._selected = profile.name
        result.update(
            Text(
                f"saved profile {profile.name!r} to {self.config.path} "
                f"(use it: swarm-tui run --provider {profile.name})"
            )
        )

    def action_probe(self) -> None:
        try:
            profile = self._form_profile()
        except ValueError as exc:
            self._refuse("cannot test", exc)
            return
        self.query_one("#probe-result", Static).update(Text(f"testing {profile.name}…"))
        self._probe(profile)

    @work(exclusive=True, group="probe")
    async def _probe(self, profile: ProviderProfile) -> None:
        result = await probe_profile(profile)
        label = "SIMULATED · " if profile.is_simulator else ""
        self.query_one("#probe-result", Static).update(Text(label + result.describe()))
