"""L1 orchestrator and L3 workers: the kernel and its lanes. Imports nothing from Textual (a test keeps it so)."""

from swarm_tui.core.events import TaskState
from swarm_tui.engine.engine import SwarmEngine
from swarm_tui.engine.settings import EngineSettings, RunStopped
from swarm_tui.engine.stats import RunStats

__all__ = ["EngineSettings", "RunStopped", "SwarmEngine", "TaskState", "RunStats"]
