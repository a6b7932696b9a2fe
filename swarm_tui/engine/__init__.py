"""L1 orchestrator and L3 workers. Imports nothing from Textual (a test keeps it so)."""

from .engine import EngineSettings, SwarmEngine
from .events import TaskState
from .stats import RunStats

__all__ = ["EngineSettings", "SwarmEngine", "TaskState", "RunStats"]
