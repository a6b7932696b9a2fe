"""The cache lane (`--cache`): tasks whose answer the response cache holds are answered from it
before admission and pacing (no slot, no rate budget, no budget reservation), and identical
requests of one run go out once.

When a run starts, the lane looks every ready task up (one query per 500 keys, `cache.store`)
and claims:
* the hits: each is journaled as a success of lane `cache` (endpoint `cache`): cost 0, its
  saving (what the original call cost) on the attempt, the answer's bytes as they were received
  — a replay, whatever the temperature was;
* the followers: a task whose request is the same as a task before it in the queue waits for
  that one's answer instead of being sent; if it fails (or the run stops) they go live.

Everything else stays in the live queue. The live lane's answers that passed the run's answer
checks come back through `remember` and are written to the cache (in small transactions);
errors, refusals, filtered, cut or empty answers and answers failing a check never are. A hit is
checked by this run's answer checks too (`engine.answers`), so a replay never brings in an answer
this job would refuse (a cache may hold answers of other jobs, or of older versions).

This module and its line in `registry.py` are the whole lane; the hooks the other lanes are built
with (`builder`) are `remember` (the live lane's answers), `replay_step` (an agent's next model
call) and `replay`/`remember` (the direct lane's calls).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING

from swarm_tui.cache import CacheEntry, ResponseCache, request_key
from swarm_tui.core.events import Attempt, TaskState, TaskSucceeded
from swarm_tui.core.lanes import CACHE
from swarm_tui.core.usage import Usage
from swarm_tui.engine.answers import USABLE
from swarm_tui.engine.calls import answer_message, cached_attempt, finish_reason
from swarm_tui.providers.client import CallResult

if TYPE_CHECKING:
    from swarm_tui.core.task import JSONObject
    from swarm_tui.engine.answers import AnswerChecks, Verdict  # noqa: F401
    from swarm_tui.engine.ports import LaneHost
    from swarm_tui.providers.client import ProviderClient

log = logging.getLogger(__name__)

HITS_PER_TURN = 500
"""Replays journaled per turn of the loop (one group commit), so that views keep up."""
FOLLOW_CHECK_S = 0.2
"""How often followers look at their leader when no answer came (it may have failed)."""


class CacheLane:
    """Answers from the response cache, and the run's duplicate requests held for one answer."""

    name = CACHE

    def __init__(
        self,
        host: LaneHost,
        cache: ResponseCache,
        client: ProviderClient,
        body_of: Callable[[int], JSONObject],
        checks: AnswerChecks | None,
        on_step: Callable[[int, Attempt, CallResult], None] | None = None,
    ) -> None:
        """`on_step`: how an agent's step goes on (`agents.ToolSteps.on_tool_request`), when the
        run's tasks are multi-step agents; their step calls are replayed one by one."""
        self.engine = host
        self.cache = cache
        self.client = client
        self.body_of = body_of
        """What the live lane would send for a task (its tools offered): what the key is of."""
        self.checks = checks
        self.on_step = on_step
        self._hits: list[tuple[int, CacheEntry]] = []
        self._followers: dict[str, list[int]] = {}
        """key -> tasks waiting for the answer of the task sent for it."""
        self._leaders: dict[str, int] = {}
        self._answers: dict[str, CacheEntry] = {}
        """This run's answers by key (followers take theirs here, whatever the cache's mode)."""
        self._wake = asyncio.Event()
        self._stopped = False

    # ----------------------------------------------------------------- keys

    def key_of_body(self, body: JSONObject, client: ProviderClient | None = None) -> str:
        client = client or self.client
        return request_key(self.cache.identity(client.base_url), client.profile.model, body)

    # ----------------------------------------------------------------- the engine's side

    def claim(self, ready: Sequence[int]) -> list[int]:
        """Take the hits and the duplicates out of the live queue; return what goes live. Agents
        stay live: each of their model calls is looked up when it is due (`replay_step`)."""
        if self.on_step is not None:
            return list(ready)
        keys = {index: self.key_of_body(self.body_of(index)) for index in ready}
        found = self.cache.lookup(keys.values()) if self.cache.reading else {}
        live: list[int] = []
        for index in ready:
            key = keys[index]
            entry = found.get(key) or self._answers.get(key)
            if entry is not None and self.on_step is None and self._acceptable(index, entry):
                self._hits.append((index, entry))
            elif key in self._leaders and not self.engine.states[self._leaders[key]].is_final:
                self._followers.setdefault(key, []).append(index)
            else:
                self._leaders[key] = index
                live.append(index)
        return live

    @property
    def waiting(self) -> list[int]:
        return [i for i, _ in self._hits] + [i for group in self._followers.values() for i in group]

    def abort(self, *, leave_open: bool = False) -> None:
        self._stopped = True
        self._wake.set()

    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        """Journal the hits, then hand each follower its leader's answer (or back to the live queue)."""
        try:
            while self._hits and not self._stopping():
                chunk, self._hits = self._hits[:HITS_PER_TURN], self._hits[HITS_PER_TURN:]
                for index, entry in chunk:
                    self._replay(index, entry)
                await asyncio.sleep(0)  # the group commit of this chunk happens here
            while self._followers and not self._stopping():
                self._settle_followers()
                if not self._followers:
                    break
                self._wake.clear()
                try:
                    async with asyncio.timeout(FOLLOW_CHECK_S):
                        await self._wake.wait()
                except TimeoutError:
                    pass
        finally:
            left = [i for i, _ in self._hits] + [i for group in self._followers.values() for i in group]
            self._hits, self._followers = [], {}
            if left:
                self.engine.give_back(left)  # a stop leaves them unfinished; a resume looks them up again
            self.cache.flush()
            self.engine.wake()

    def _stopping(self) -> bool:
        return self._stopped or self.engine.stopping is not None

    def _settle_followers(self) -> None:
        states = self.engine.states
        for key in list(self._followers):
            entry = self._answers.get(key)
            if entry is not None:
                for index in self._followers.pop(key):
                    if self._acceptable(index, entry):
                        self._replay(index, entry)
                    else:
                        self.engine.give_back([index])
                continue
            leader = self._leaders.get(key)
            if leader is None or states[leader].is_final or states[leader] is TaskState.CANCELLED:
                self.engine.give_back(
                    self._followers.pop(key)
                )  # it failed, was cancelled (`x`), or answered another body

    # ----------------------------------------------------------------- replays

    def _acceptable(self, index: int, entry: CacheEntry) -> bool:
        """This run's answer checks take the cached answer (a cache may hold answers of other jobs)."""
        return self._verdict(index, entry) is not None

    def _verdict(self, index: int, entry: CacheEntry) -> Verdict | None:
        """The cached answer's verdict for task `index` when usable (None: unreadable or refused)."""
        try:
            result = self._result(entry)
        except ValueError:
            return None
        if self.checks is None:
            return USABLE
        verdict = self.checks.verdict(self.engine.tasks[index].body, result)
        return verdict if verdict.ok else None

    @staticmethod
    def _result(entry: CacheEntry) -> CallResult:
        return CallResult(json.loads(entry.response), _usage(entry), entry.request_id, raw=entry.response)

    def _replay(self, index: int, entry: CacheEntry) -> None:
        engine = self.engine
        if engine.states.get(index) is TaskState.SUCCEEDED:
            return
        verdict = self._verdict(index, entry)
        if verdict is None:  # unreadable, or this job refuses it: sent live
            engine.give_back([index])
            return
        content = self._result(entry).content
        attempt = cached_attempt(
            index,
            engine.numbers.next(index),
            CallResult({}, Usage(), entry.request_id),
            entry.cost_usd,
            entry.finish_reason,
        )
        self.cache.used(entry.key)
        engine.outbox.commit_soon(
            partial(engine.journal.record_success, attempt, entry.response, parsed=verdict.parsed),
            events=[TaskSucceeded(attempt, content, checks=verdict.checks)],
        )

    def replay(self, body: JSONObject, client: ProviderClient) -> tuple[CallResult, float | None, str | None] | None:
        """A direct call's answer (planner, aggregator, judge), when the cache holds it."""
        key = self.key_of_body(body, client)
        entry = self._answers.get(key) or (self.cache.lookup([key]).get(key) if self.cache.reading else None)
        if entry is None:
            return None
        try:
            result = self._result(entry)
        except ValueError:
            return None
        self.cache.used(key)
        return result, entry.cost_usd, entry.finish_reason

    def replay_step(self, index: int) -> bool:
        """An agent's next model call, from the cache: a step that asked for tools (they run
        again, for real) or its final answer. False: not cached, it is sent."""
        key = self.key_of_body(self.body_of(index))
        entry = self._answers.get(key) or (self.cache.lookup([key]).get(key) if self.cache.reading else None)
        if entry is None or self.on_step is None:
            return False
        try:
            result = self._result(entry)
        except ValueError:
            return False
        if not answer_message(result).get("tool_calls"):
            if not self._acceptable(index, entry):
                return False
            self._replay(index, entry)
            return True
        attempt = cached_attempt(index, self.engine.numbers.next(index), result, entry.cost_usd, entry.finish_reason)
        self.cache.used(key)
        self.on_step(index, replace(attempt, outcome="step"), result)
        return True

    # ----------------------------------------------------------------- the live lane's answers

    def remember(self, body: JSONObject, client: ProviderClient, result: CallResult, cost_usd: float | None) -> None:
        """A usable answer of the live lane: kept for this run's followers, and in the cache
        (when it writes)."""
        raw = result.raw if result.raw is not None else json.dumps(result.body, ensure_ascii=False).encode("utf-8")
        key = self.key_of_body(body, client)
        usage = result.usage
        model = body.get("model")
        entry = CacheEntry(
            key,
            model if isinstance(model, str) and model else client.profile.model,
            raw,
            result.request_id,
            finish_reason(result),
            usage.prompt,
            usage.completion,
            usage.cached,
            usage.reasoning,
            cost_usd,
            time.time(),
        )
        if key in self._followers:
            self._answers[key] = entry
            self._wake.set()
        self.cache.put(entry)


def _usage(entry: CacheEntry) -> Usage:
    return Usage(entry.prompt_tokens, entry.completion_tokens, entry.cached_tokens, entry.reasoning_tokens)
