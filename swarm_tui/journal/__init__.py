"""The run's journal (SQLite in the run directory): see `journal.store` for what it promises.

`from swarm_tui.journal import Journal` is the way in; the package's modules are its parts
(`store`'s docstring lists them).
"""

from __future__ import annotations

from ..rundir import JOURNAL_NAME
from .migrate import JournalFollower, migrate
from .queries import TaskRow
from .schema import SCHEMA_VERSION
from .store import IncompleteRunError, Journal

__all__ = ["JOURNAL_NAME", "SCHEMA_VERSION", "IncompleteRunError", "Journal", "JournalFollower", "TaskRow", "migrate"]
