"""The swarm's rate limiter: a Ray actor holding one provider's `SharedBudget`.

Calls are tiny and served one at a time (a plain, non-async actor), so the budget needs no lock.
It asks for no CPU, so it never competes with the workers for a slot.
"""

from __future__ import annotations

from typing import Any

import ray

from swarm_tui.distributed.budget import Grant, SharedBudget


@ray.remote(num_cpus=0, max_restarts=0)
class RateLimiter:
    def __init__(self, rpm: int | None = None, tpm: int | None = None) -> None:
        self.budget = SharedBudget(rpm, tpm)

    def lease(self, requests: int, tokens_each: int = 0, **pending: int) -> Grant:
        return self.budget.lease(requests, tokens_each, **pending)

    def close_gate(self, seconds: float) -> bool:
        return self.budget.close_gate(seconds)

    def note_congestion(self) -> int:
        return self.budget.note_congestion()

    def learn(self, rpm: int | None, tpm: int | None) -> None:
        self.budget.learn(rpm, tpm)

    def state(self) -> Grant:
        return self.budget.state()

    def stats(self) -> dict[str, Any]:
        b = self.budget
        return {
            "lease_calls": b.lease_calls,
            "leased_requests": b.leased_requests,
            "congestion": b.congestion,
            "rpm": b.limits.rpm,
            "tpm": b.limits.tpm,
        }
