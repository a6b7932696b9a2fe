"""The run's journal (SQLite in the run directory): see `journal.store` for what it promises.

`from swarm_tui.journal import Journal` is the way in; the package's modules are its parts
(`store`'s docstring lists them).
"""

from __future__ import annotations

from swarm_tui.journal.migrate import JournalFollower, migrate
from swarm_tui.journal.queries import TaskRow
from swarm_tui.journal.schema import JOURNAL_NAME, SCHEMA_VERSION
from swarm_tui.journal.store import IncompleteRunError, Journal

__all__ = ["JOURNAL_NAME", "SCHEMA_VERSION", "IncompleteRunError", "Journal", "JournalFollower", "TaskRow", "migrate"]
