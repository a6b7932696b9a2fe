"""A stored run opened to go on (`resume`): its directory's one-writer lock taken, its journal
opened for writing and its meta read and decoded, each once, before anything else is decided.

The resume's plan is resolved from it (`run.resolve.resolve_resume`: the stored plan with what
the flags change), checked (`run.preflight`), and only then does the session begin the journal's
new session (`SwarmSession.open_existing`: the first write, where an older journal is brought to
this version's log, once). Opening the journal for writing gives an older one this version's empty
tables and columns; the run's content is untouched until the session begins.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from swarm_tui.cache import CacheSettings
from swarm_tui.engine import EngineSettings
from swarm_tui.journal import JOURNAL_NAME, Journal
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.providers.routes import RoutePlan
from swarm_tui.records import RunMeta, RunPlan
from swarm_tui.run.directory import RunDirLock
from swarm_tui.sim import SimConfig


class StoredRun:
    """A run directory held by this process to go on: the lock, the journal, its decoded meta."""

    def __init__(self, run_dir: Path, lock: RunDirLock, journal: Journal, meta: RunMeta, first_task_model: str | None):
        self.run_dir = run_dir
        self.lock = lock
        self.journal = journal
        self.meta = meta
        """What the journal keeps of the run (its plan's model decided from its first task)."""
        self.first_task_model = first_task_model
        """The model the run's first task names: what a new profile without a model leaves the run on."""

    @classmethod
    def open(cls, run_dir: Path) -> StoredRun:
        """The run in `run_dir`, held for this process: FileNotFoundError (exit 2) when there is none,
        RunDirBusy (exit 2, naming its PID) when another live process writes it, InputError when its
        journal cannot take writes, IncompleteRunError when it is not a whole run."""
        if not (run_dir / JOURNAL_NAME).is_file():  # said before a lock file is made in a directory that holds no run
            raise FileNotFoundError(f"no journal in {run_dir} (expected {JOURNAL_NAME})")
        lock = RunDirLock(run_dir).acquire()
        try:
            journal = Journal.open(run_dir)
            try:
                first = journal.queries.first_model()
                meta = RunMeta.from_meta(journal.queries.meta(), first)
            except BaseException:
                journal.close()
                raise
        except BaseException:
            lock.release()
            raise
        return cls(run_dir, lock, journal, meta, first)

    def plan_with(
        self,
        *,
        profile: ProviderProfile | None = None,
        settings: EngineSettings | None = None,
        cache: CacheSettings | None = None,
        sim: SimConfig | None = None,
        route: RoutePlan | None = None,
        escalate: ProviderProfile | None = None,
    ) -> RunPlan:
        """The stored plan with what a resume changes; `route` counts only with a new `profile` (the
        route it heads): without one the run's own route goes on; `escalate`: another escalation
        endpoint (without one, the run's own, if any). The run's model is decided again for the
        endpoint it goes on with."""
        kept = self.meta.plan
        plan = RunPlan(
            profile or kept.profile,
            settings or kept.settings,
            sim or kept.sim,
            kept.prices,
            kept.route if profile is None else route,
            cache or kept.cache,
            escalate=escalate or kept.escalate,
        )
        return plan.deciding_model(self.first_task_model, self.meta.template)

    def moved(self, plan: RunPlan) -> RunPlan | None:
        """The stored plan as it must be kept from now on, when `plan` moves the run to another
        endpoint or route (a later resume goes on there); None when it stays where it was."""
        kept = self.meta.plan
        if (plan.profile, plan.route) == (kept.profile, kept.route):
            return None
        return replace(kept, profile=plan.profile, route=plan.route)

    @contextlib.contextmanager
    def released_on_error(self) -> Iterator[StoredRun]:
        """Hand the run over to a session inside: if anything fails first, the journal is closed and
        the lock released (the session, once open, owns both)."""
        try:
            yield self
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self.journal.close()
        self.lock.release()
