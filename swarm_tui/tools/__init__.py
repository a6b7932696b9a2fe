"""Tools for multi-step agents: what a job declares (`spec`), what runs them (`toolbox`), and
how an agent's transcript says where it stands (`transcript`). No Textual here."""

from swarm_tui.tools.spec import ToolsSpec, parse_tools_spec
from swarm_tui.tools.toolbox import Toolbox, ToolOutcome, ToolSetupError

__all__ = ["ToolOutcome", "ToolSetupError", "Toolbox", "ToolsSpec", "parse_tools_spec"]
