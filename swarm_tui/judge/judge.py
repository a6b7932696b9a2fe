"""The judge: a sampled share of the answers scored by an LLM, live, and quality drift acted on.

A side lane of calls keyed to the task they judge (as the planner's are): each goes through the
engine's admission, pacing, retries and journal (`call_direct`, phase `judge`, index
`JUDGE_INDEX - task`), billed apart. Its verdict is journaled with an `AnswerJudged` event, so
every view (live or attached) shows the same scores, and a resumed run never judges an answer
twice. When the rolling score falls past the allowed drop below its baseline (`monitor`), the
configured action runs and a `QualityDrift` event says so.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from swarm_tui.core.events import AnswerJudged, EngineEvent, QualityDrift, TaskSucceeded
from swarm_tui.core.notes import JudgeFailed
from swarm_tui.engine.settings import RunStopped
from swarm_tui.engine.stats import JUDGE_PHASE, nearest_rank
from swarm_tui.jobs.judge_spec import JudgeSpec
from swarm_tui.judge.monitor import Drift, QualityMonitor
from swarm_tui.judge.verdict import Score, VerdictError, pointwise_body, read_score, reask_body, task_text

if TYPE_CHECKING:
    from swarm_tui.core.task import Task
    from swarm_tui.engine.pacing.admission import AdmissionController
    from swarm_tui.journal import Journal
    from swarm_tui.pricing import Price
    from swarm_tui.providers.client import CallResult, ProviderClient

log = logging.getLogger(__name__)

JUDGE_INDEX = -1_000_000
"""A judge call of task i is journaled under index `JUDGE_INDEX - i` (below every other phase's)."""
CONCURRENCY = 4
"""Judge calls in flight at most (they share the run's admission when they share its endpoint)."""


class JudgedEngine(Protocol):
    """What the judge asks of the engine it watches: `SwarmEngine` here, `RayEngine` on Ray
    (whose judge calls are made from the driver)."""

    @property
    def tasks(self) -> Mapping[int, Task]: ...
    def subscribe(self, listener: Callable[[EngineEvent], None]) -> None: ...
    async def call_direct(
        self,
        phase: str,
        index: int,
        body: dict,
        *,
        client: ProviderClient | None = None,
        admission: AdmissionController | None = None,
    ) -> CallResult: ...
    def record(self, write: Callable[[Sequence[EngineEvent]], None], *, events: Sequence[EngineEvent]) -> None: ...
    def emit_now(self, event: EngineEvent) -> None: ...
    def log(self, kind: str, data: dict[str, Any] | None = None) -> None: ...
    def pause(self) -> None: ...
    def fail_over(self, reason: str) -> bool: ...
    def add_price(self, endpoint: str, price: Price | None, tier: str | None = None) -> None: ...


def sampled(custom_id: str, rate: float) -> bool:
    """Whether an answer is in the judged share: a hash of its id, so a resume samples the same."""
    return zlib.crc32(custom_id.encode("utf-8")) / 2**32 < rate


class Judge:
    def __init__(
        self,
        engine: JudgedEngine,
        journal: Journal,
        spec: JudgeSpec,
        *,
        model: str,
        action: str,
        actions: dict[str, Callable[[], str]],
        round_of: Callable[[], int] = lambda: 1,
        client: ProviderClient | None = None,
        admission: AdmissionController | None = None,
    ) -> None:
        """`actions`: what each action does (returns what it did, for the event); `round_of`:
        the swarm's current round; `client`/`admission`: a judge endpoint of its own."""
        self.engine = engine
        self.journal = journal
        self.spec = spec
        self.model = model
        self.action = action
        self.actions = actions
        self.round_of = round_of
        self.client = client
        self.admission = admission
        self.monitor = QualityMonitor(spec)
        self.errors = 0
        self._slots = asyncio.Semaphore(CONCURRENCY)
        self._pending: dict[int, asyncio.Task[None]] = {}
        self._judged: set[int] = set()
        self._per_round: Counter[int] = Counter()
        for index, (score, _, round_number) in journal.history.judgments().items():  # a resumed run
            self._judged.add(index)
            self._per_round[round_number] += 1
            self.monitor.observe(score)

    def observe(self, event: EngineEvent) -> None:
        """Engine listener: an answer that just succeeded may be judged."""
        if not isinstance(event, TaskSucceeded):
            return
        index = event.index
        if index in self._judged or index in self._pending or not self._wanted(index):
            return
        self._per_round[self.round_of()] += 1
        task = asyncio.get_running_loop().create_task(self._judge(index, event.content), name=f"judge-{index}")
        self._pending[index] = task
        task.add_done_callback(lambda _: self._pending.pop(index, None))

    async def settle(self) -> None:
        """Wait for the judge calls in flight (before a round's memory is built, before the outputs)."""
        while self._pending:
            await asyncio.gather(*self._pending.values(), return_exceptions=True)

    def _wanted(self, index: int) -> bool:
        if self._per_round[self.round_of()] < self.spec.first:
            return True
        return sampled(self.engine.tasks[index].custom_id, self.spec.rate)

    async def _judge(self, index: int, answer: str) -> None:
        task = self.engine.tasks[index]
        body = pointwise_body(self.model, self.spec.rubric, task_text(task.body), answer, self.spec.max_tokens)
        async with self._slots:
            try:
                verdict = await self._ask(index, body)
            except RunStopped:
                return
            except Exception as exc:  # noqa: BLE001 - a judge that fails must not stop the swarm
                self.errors += 1
                log.warning("the judge could not score task %s: %s", task.custom_id, exc)
                self.engine.log("judge_failed", {"index": index, "error": str(exc)[:300]})
                return
        self._record(index, verdict)

    async def _ask(self, index: int, body: dict) -> Score:
        """The judge's verdict, re-asked once when its answer cannot be read."""
        call = self.engine.call_direct
        result = await call(JUDGE_PHASE, JUDGE_INDEX - index, body, client=self.client, admission=self.admission)
        try:
            return read_score(result.content)
        except VerdictError:
            again = reask_body(body, result.content)
            result = await call(JUDGE_PHASE, JUDGE_INDEX - index, again, client=self.client, admission=self.admission)
            return read_score(result.content)  # a second unreadable answer is the judge's failure

    def _record(self, index: int, verdict: Score) -> None:
        self._judged.add(index)
        round_number = self.round_of()
        drift = self.monitor.observe(verdict.score)
        judged = AnswerJudged(
            index, verdict.score, verdict.reason, round_number, self.monitor.rolling, self.monitor.baseline
        )
        self.engine.record(
            partial(self.journal.records.record_judgment, index, verdict.score, verdict.reason, round_number),
            events=[judged],
        )
        if drift is not None:
            self._act(drift, round_number)

    def _act(self, drift: Drift, round_number: int) -> None:
        allowed = self.spec.allowed_drop(drift.baseline)
        why = (
            f"judge score {drift.rolling:.1f} is {drift.baseline - drift.rolling:.1f} below its baseline "
            f"{drift.baseline:.1f} (allowed drop {allowed:.1f})"
        )
        log.warning("quality drift: %s; action: %s", why, self.action)
        detail = self.actions[self.action]() if self.action in self.actions else "alert only"
        self.engine.emit_now(QualityDrift(drift.rolling, drift.baseline, self.action, f"{why}; {detail}", round_number))


def quality_summary(journal: Journal) -> dict[str, Any] | None:
    """summary.json's `quality`: what was judged, by round, the drifts acted on, and the judge's
    cost (apart from the swarm's); None for a run without a judge."""
    judgments = journal.history.judgments()
    noted = journal.history.logged(JudgeFailed, QualityDrift)
    errors = sum(1 for _, event in noted if isinstance(event, JudgeFailed))
    if not judgments and not errors:
        return None
    scores = sorted(score for score, _, _ in judgments.values())
    by_round: dict[int, list[float]] = {}
    for score, _, round_number in judgments.values():
        by_round.setdefault(round_number, []).append(score)
    return {
        "judged": len(scores),
        "mean": round(sum(scores) / len(scores), 2) if scores else None,
        "p10": nearest_rank(scores, 0.10),
        "by_round": {
            str(r): {"judged": len(s), "mean": round(sum(s) / len(s), 2)} for r, s in sorted(by_round.items())
        },
        "drifts": [
            {
                "at": at,
                "rolling": round(event.rolling, 2),
                "baseline": round(event.baseline, 2),
                "action": event.action,
                "detail": event.detail,
                "round": event.round,
            }
            for at, event in noted
            if isinstance(event, QualityDrift)
        ],
        "judge_errors": errors,
        "judge_cost_usd": round(journal.queries.cost_of_indices_below(JUDGE_INDEX + 1), 6),
    }
