"""L1 orchestrator and L3 workers: the engine, its kernel parts and its lanes. Imports nothing from
Textual (a test keeps it so). An engine is made by `builder.build_engine`."""

from swarm_tui.core.events import TaskState
from swarm_tui.engine.builder import AnswerRules, Doors, Resumed, build_engine
from swarm_tui.engine.settings import EngineSettings, RunStopped
from swarm_tui.engine.stats import RunStats

__all__ = [
    "AnswerRules",
    "Doors",
    "EngineSettings",
    "Resumed",
    "RunStopped",
    "RunStats",
    "TaskState",
    "build_engine",
]
