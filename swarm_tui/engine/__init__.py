"""L1 orchestrator and L3 workers. Imports nothing from Textual (a test keeps it so)."""

from ..core.events import TaskState
from .engine import EngineSettings, SwarmEngine
from .stats import RunStats

__all__ = ["EngineSettings", "SwarmEngine", "TaskState", "RunStats"]
