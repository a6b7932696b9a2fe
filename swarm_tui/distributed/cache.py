"""The response cache of a distributed run (`--ray --cache`): the driver looks every task up
before it shards any (a hit is journaled on the driver as a success of lane `cache`, cost 0, and
never reaches an actor), and keeps the answers the shards' engines validated as their successes
arrive. The actors never open the cache file: one process writes it per run."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial

from swarm_tui.cache import CacheEntry, ResponseCache, request_key
from swarm_tui.core.events import Attempt, TaskSucceeded
from swarm_tui.core.ports import JournalSink
from swarm_tui.core.task import JSONObject, Task
from swarm_tui.core.usage import Usage
from swarm_tui.engine.answers import AnswerChecks
from swarm_tui.engine.calls import cached_attempt
from swarm_tui.engine.kernel.outbox import Outbox
from swarm_tui.providers.client import CallResult, ProviderClient


class DriverCache:
    def __init__(self, cache: ResponseCache, client: ProviderClient, checks: AnswerChecks | None) -> None:
        self.cache = cache
        self.client = client
        self.checks = checks

    def _key(self, body: JSONObject) -> str:
        return request_key(self.cache.identity(self.client.base_url), self.client.profile.model, body)

    def replay(
        self,
        pending: Sequence[int],
        tasks: Mapping[int, Task],
        number: Callable[[int], int],
        outbox: Outbox,
        journal: JournalSink,
    ) -> list[int]:
        """Journal the hits among `pending` (through the driver's `outbox`, numbered by `number`);
        return the tasks still to shard."""
        found = self.cache.lookup(self._key(tasks[i].body) for i in pending) if self.cache.reading else {}
        left: list[int] = []
        for index in pending:
            entry = found.get(self._key(tasks[index].body))
            result = _result(entry) if entry is not None else None
            verdict = self.checks.verdict(tasks[index].body, result) if self.checks and result is not None else None
            if entry is None or result is None or (verdict is not None and not verdict.ok):
                left.append(index)  # not cached, or this job refuses the cached answer: sent
                continue
            attempt = cached_attempt(index, number(index), result, entry.cost_usd, entry.finish_reason)
            self.cache.used(entry.key)
            parsed, passed = (verdict.parsed, verdict.checks) if verdict is not None else (None, ())
            succeeded = TaskSucceeded(attempt, result.content, checks=passed)
            outbox.commit_soon(
                partial(journal.record_success, attempt, entry.response, parsed=parsed), events=[succeeded]
            )
        self.cache.flush()
        return left

    def kept(self, task: Task, attempt: Attempt, response: JSONObject | bytes) -> None:
        """A shard's success (validated there): kept, when it came from the run's primary endpoint."""
        if attempt.endpoint != self.client.name or not self.cache.writing:
            return
        raw = response if isinstance(response, bytes) else json.dumps(response, ensure_ascii=False).encode("utf-8")
        usage = attempt.usage
        model = task.body.get("model") or self.client.profile.model
        self.cache.put(
            CacheEntry(
                self._key(task.body),
                model,
                raw,
                attempt.request_id,
                attempt.finish_reason,
                usage.prompt,
                usage.completion,
                usage.cached,
                usage.reasoning,
                attempt.cost_usd,
                time.time(),
            )
        )


def _result(entry: CacheEntry) -> CallResult | None:
    try:
        body = json.loads(entry.response)
    except ValueError:
        return None
    return CallResult(body, _usage(entry), entry.request_id, raw=entry.response)


def _usage(entry: CacheEntry) -> Usage:
    return Usage(entry.prompt_tokens, entry.completion_tokens, entry.cached_tokens, entry.reasoning_tokens)
