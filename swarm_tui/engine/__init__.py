"""L1 orchestrator and L3 workers: the kernel and its lanes. Imports nothing from Textual (a test keeps it so)."""

from ..core.events import TaskState
from .engine import SwarmEngine
from .settings import EngineSettings, RunStopped
from .stats import RunStats

__all__ = ["EngineSettings", "RunStopped", "SwarmEngine", "TaskState", "RunStats"]
