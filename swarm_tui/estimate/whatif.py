"""What-if replay (`swarm-tui replay RUN [--concurrency N] [--lane L] [--deadline WHEN]`): a
recorded run's measured provider played through the engine at other settings, offline.

From the run's journal it takes what the provider did: the median and spread of its answers'
latencies (a lognormal fitted at the median and the 84th percentile), its share of server errors,
the RPM it stated or was estimated at, its batch turnaround, and what an answer cost live and as
a batch line. An embedded simulator plays that provider (no network, no key), and the run's own
tasks go through the real engine at the settings asked for, time compressed by a factor (the
simulator's latencies and batches shorter, its RPM higher by the same factor, the makespan
scaled back). The planner (`--deadline`) uses the same engine, so its plans can be tried here
before a run pays for them.
"""

from __future__ import annotations

import asyncio
import json
import math
import sqlite3
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from swarm_tui.core.errors import InputError
from swarm_tui.core.lanes import is_batch_endpoint
from swarm_tui.core.task import Task
from swarm_tui.engine import EngineSettings
from swarm_tui.jobs import Job
from swarm_tui.journal import Journal
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.records import RunMeta, RunPlan
from swarm_tui.sim import SimConfig, SimServer

TARGET_S = 20.0
"""Replays longer than this are compressed to about this long."""
MAX_COMPRESSION = 10.0
"""Past this the engine's own fixed timings (backoffs, polls) would weigh more than the provider's."""


@dataclass(frozen=True)
class Recorded:
    """What a recorded run measured of its provider, and what it did."""

    makespan_s: float
    requests: int
    succeeded: int
    p50_ms: float
    sigma: float
    error_rate: float
    rpm: int | None
    batch_turnaround_s: float | None
    live_cost: float | None
    """USD per live answer (None: no live answer was priced)."""
    batch_cost: float | None
    models: tuple[str, ...]
    cost_usd: float | None
    """What the run was billed (None: some of it was not priced)."""


def measure(run_dir: Path) -> tuple[Recorded, RunPlan, Job]:
    """The recorded run's provider, plan and tasks (InputError when it holds nothing to replay)."""
    journal = Journal.open(run_dir, readonly=True)
    try:
        plan = RunMeta.read(journal).plan
        rows = journal.queries.tasks()
        db = sqlite3.connect(f"file:{journal.path}?mode=ro", uri=True)
        try:
            recorded = _recorded(db, rows)
        finally:
            db.close()
    finally:
        journal.close()
    tasks = [Task(row.index, row.custom_id, row.body) for row in rows]
    return recorded, plan, Job(name=f"replay of {run_dir.name}", source=str(run_dir), tasks=tasks)


def _recorded(db: sqlite3.Connection, rows) -> Recorded:
    attempts = db.execute(
        "SELECT endpoint, outcome, status, error_class, latency_ms, cost_usd, started_at FROM attempts "
        "WHERE endpoint != 'cache'"
    ).fetchall()
    live = [a for a in attempts if not is_batch_endpoint(a[0])]
    ok = sorted(a[4] for a in live if a[1] == "ok")
    if not ok and not any(a[1] == "ok" for a in attempts):
        raise InputError.single(_path_of(db), "attempts", "no answer to learn the provider from: nothing to replay")
    p50 = ok[len(ok) // 2] if ok else 1000.0
    p84 = ok[min(len(ok) - 1, int(0.84 * len(ok)))] if ok else p50
    sigma = max(0.05, math.log(p84 / p50)) if p50 > 0 and p84 > 0 else 0.3
    errors = sum(1 for a in live if a[3] == "server")
    first = min((a[6] for a in attempts), default=0.0)
    last = max((a[6] + a[4] / 1000 for a in attempts), default=0.0)
    live_ok = [a for a in live if a[1] == "ok" and a[5] is not None]
    batch_ok = [a for a in attempts if is_batch_endpoint(a[0]) and a[1] == "ok" and a[5] is not None]
    turnaround = max((a[4] / 1000 for a in batch_ok), default=None)
    learned = db.execute("SELECT data FROM log WHERE kind = 'RateLimitsLearned' ORDER BY seq DESC LIMIT 1").fetchone()
    rpm = json.loads(learned[0]).get("rpm") if learned is not None else None
    models = tuple(sorted({str(row.body.get("model")) for row in rows if row.body.get("model")}))
    return Recorded(
        makespan_s=max(0.0, last - first),
        requests=len(live),
        succeeded=sum(1 for a in attempts if a[1] == "ok"),
        p50_ms=p50,
        sigma=sigma,
        error_rate=errors / len(live) if live else 0.0,
        rpm=rpm,
        batch_turnaround_s=turnaround,
        live_cost=sum(a[5] for a in live_ok) / len(live_ok) if live_ok else None,
        batch_cost=sum(a[5] for a in batch_ok) / len(batch_ok) if batch_ok else None,
        models=models,
        cost_usd=None if any(a[5] is None and a[1] == "ok" for a in attempts) else sum(a[5] or 0.0 for a in attempts),
    )


def _path_of(db: sqlite3.Connection) -> str:
    return db.execute("PRAGMA database_list").fetchone()[2]


def compression(recorded: Recorded) -> float:
    return min(MAX_COMPRESSION, max(1.0, recorded.makespan_s / TARGET_S))


def simulated(recorded: Recorded, k: float) -> SimConfig:
    """A simulator that answers as the recorded provider did, `k` times faster."""
    return SimConfig(
        latency_ms=recorded.p50_ms / k,
        latency_sigma=recorded.sigma,
        rpm=round(recorded.rpm * k) if recorded.rpm else None,
        error_rate=recorded.error_rate,
        batch_seconds=(recorded.batch_turnaround_s or 20.0) / k,
        models=(*recorded.models, "sim-1"),
        seed=7,
    )


@dataclass(frozen=True)
class Prediction:
    makespan_s: float
    requests: int
    succeeded: int
    total: int
    cost_usd: float | None
    live: int
    batch: int


def replay(run_dir: Path, changes: dict[str, Any]) -> tuple[Recorded, Prediction, float]:
    """Play the recorded run at its settings with `changes` (EngineSettings fields); returns what
    was recorded, the prediction and the compression it ran at."""
    recorded, plan, job = measure(run_dir)
    k = compression(recorded)
    settings: EngineSettings = plan.settings.but(**changes)
    deadline = settings.lanes.deadline_at if "deadline_at" in changes else None  # a recorded one has passed
    settings = settings.but(
        timeout_s=settings.calls.timeout_s / k,
        budget_usd=None,  # the cost is predicted, not spent
        deadline_at=None if deadline is None else time.time() + (deadline - time.time()) / k,
    )
    sim = SimServer(simulated(recorded, k)).start(mode="process")  # its own process: not the engine's GIL
    try:
        with tempfile.TemporaryDirectory(prefix="swarm-tui-replay-") as tmp:
            profile = ProviderProfile(name="replay", base_url=sim.base_url)
            sim_plan = RunPlan(profile, settings, None, plan.prices)
            prediction = asyncio.run(_play(job, sim_plan, Path(tmp) / "replay", k, recorded))
    finally:
        sim.stop()
    return recorded, prediction, k


async def _play(job: Job, plan: RunPlan, run_dir: Path, k: float, recorded: Recorded) -> Prediction:
    from swarm_tui.run.session import SwarmSession

    session = SwarmSession.open_new(job, plan, run_dir)
    try:
        await session.run()
    finally:
        await session.aclose()
    db = sqlite3.connect(run_dir / "journal.sqlite")
    try:
        rows = db.execute("SELECT endpoint, outcome, started_at, latency_ms FROM attempts").fetchall()
    finally:
        db.close()
    first = min((r[2] for r in rows), default=0.0)
    last = max((r[2] + r[3] / 1000 for r in rows), default=0.0)
    batch = sum(1 for r in rows if r[1] == "ok" and is_batch_endpoint(r[0]))
    live = sum(1 for r in rows if r[1] == "ok" and not is_batch_endpoint(r[0]))
    live_cost, batch_cost = recorded.live_cost, recorded.batch_cost  # a batch line at half the live price
    live_cost = live_cost if live_cost is not None else (batch_cost * 2 if batch_cost is not None else None)
    batch_cost = batch_cost if batch_cost is not None else (live_cost / 2 if live_cost is not None else None)
    priced = (not live or live_cost is not None) and (not batch or batch_cost is not None)
    cost = live * (live_cost or 0.0) + batch * (batch_cost or 0.0) if priced else None
    return Prediction(
        makespan_s=(last - first) * k,
        requests=sum(1 for r in rows if not is_batch_endpoint(r[0])),
        succeeded=live + batch,
        total=len(job.tasks),
        cost_usd=cost,
        live=live,
        batch=batch,
    )


def report(run_dir: Path, recorded: Recorded, prediction: Prediction, k: float, asked: str) -> str:
    """The recorded figures beside the replay's, as a small table."""

    def cost(usd: float | None) -> str:
        return "not priced" if usd is None else f"${usd:.4f}"

    rows = [
        ("makespan", f"{recorded.makespan_s:.1f} s", f"{prediction.makespan_s:.1f} s"),
        ("answers", f"{recorded.succeeded}", f"{prediction.succeeded}/{prediction.total}"),
        ("live requests", f"{recorded.requests}", f"{prediction.requests}"),
        ("as batch lines", "", f"{prediction.batch}"),
        ("cost", cost(recorded.cost_usd), cost(prediction.cost_usd)),
    ]
    width = max(len(r[1]) for r in rows) + 2
    lines = [
        f"replay of {run_dir} ({asked}), its provider as measured: p50 {recorded.p50_ms:.0f} ms, sigma "
        f"{recorded.sigma:.2f}, {recorded.error_rate:.1%} server errors, "
        + (f"{recorded.rpm:,} RPM" if recorded.rpm else "no RPM stated")
        + (f", batches in {recorded.batch_turnaround_s:.0f} s" if recorded.batch_turnaround_s else "")
        + f"; time compressed x{k:g}",
        f"{'':16}{'recorded':<{width}}replay",
        *(f"{name:16}{was:<{width}}{now}" for name, was, now in rows),
    ]
    return "\n".join(lines)
