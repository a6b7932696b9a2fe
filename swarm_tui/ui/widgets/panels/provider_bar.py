"""The provider bar, the console's top line: where the requests go (the profile, the endpoint or
the route's doors, the model), whether the key's env var is set, and the provider pane's key.
It says SIMULATED in plain words for the embedded simulator and ATTACHED for a view of a run
another process drives. At a narrow width the explanations go first, never the badge or the hint.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.text import Text

from swarm_tui.providers.profile import key_status
from swarm_tui.ui.keys import key_hint
from swarm_tui.ui.widgets.panels.text_panel import TextPanel

if TYPE_CHECKING:
    from swarm_tui.frontend.source import RunSource


class ProviderBar(TextPanel):
    """One line: where the requests go. Says SIMULATED in plain words for the simulator."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "provider-bar--simulated",
        "provider-bar--attached",
        "provider-bar--dim",
        "provider-bar--bad",
    }

    DEFAULT_CSS = """
    ProviderBar { height: 1; background: $panel; color: $foreground; padding: 0 1; }
    ProviderBar > .provider-bar--simulated { color: $background; background: $swarm-simulated; text-style: bold; }
    ProviderBar > .provider-bar--attached { color: $background; background: $swarm-attached; text-style: bold; }
    ProviderBar > .provider-bar--dim { color: $text-muted; }
    ProviderBar > .provider-bar--bad { color: $error; text-style: bold; }
    """

    def update_from(self, source: RunSource) -> None:
        """Where the requests go, then the pane's key; at a narrow width the explanations go
        first (the simulator's, the key's env var), never the SIMULATED badge or the hint."""
        style = self.get_component_rich_style
        dim = style("provider-bar--dim")
        width = self.content_size.width
        head = Text(no_wrap=True, overflow="ellipsis")
        if source.attached:
            head.append(" ATTACHED ", style("provider-bar--attached"))
            head.append(" ")
        profile = source.profile
        doors = source.view.endpoints
        head.append(profile.name, "bold")
        head.append(" │ ", dim)
        if source.simulated:
            head.append(" SIMULATED ", style("provider-bar--simulated"))
        elif doors.routed:  # a route: its endpoints, the run panel's rows say how each does
            head.append("route " + ", ".join(doors.doors))
        else:
            head.append(source.base_url)
        model = Text()
        model.append(" │ model ", dim)
        model.append(source.model or "(as in each request)")
        about = Text()
        if source.simulated:
            about.append(" │ embedded simulator: no key, no network, not a real model", dim)
        else:
            env = profile.api_key_env or "OPENAI_API_KEY"
            status = key_status(profile)
            about.append(" │ key ", dim)
            about.append(f"{env} {status}", style("provider-bar--bad") if status == "missing" else "")
        hint = Text(f" │ {key_hint(self.app, type(self.app), 'app.provider')}: provider pane", dim)
        text = head
        for part in (model, about):
            if not width or text.cell_len + part.cell_len + hint.cell_len <= width:
                text.append_text(part)
        text.append_text(hint)
        self.show(text)
