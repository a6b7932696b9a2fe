"""The run's Ray actors: the worker actors that run shards, the rate limiter they share, and
the record of each shard handed to one of them.

Actors are made on demand (one per alive node by default), spread over the cluster; an actor
found dead is remembered so no shard goes to it again, and a new one takes its place."""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

import ray

from swarm_tui.core.errors import InputError
from swarm_tui.distributed.limiter import RateLimiter
from swarm_tui.distributed.worker import SwarmWorker
from swarm_tui.providers.profile import ProviderProfile

CLOSE_S = 5.0
"""How long the actors get to stop their MCP servers before they are killed."""


def connect(address: str | None) -> None:
    """`ray.init` once: a new local cluster for None/"local", else the given address ("auto", ray://...)."""
    if ray.is_initialized():
        return
    kwargs: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.WARNING}
    try:
        if address in (None, "", "local"):
            ray.init(include_dashboard=False, **kwargs)
        else:
            ray.init(address=address, **kwargs)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise InputError.single("--ray", "address", f"cannot connect to Ray at {address!r}: {exc}") from None


def key_env(profile: ProviderProfile) -> dict[str, str]:
    """The key env vars the actors need, from the driver's environment (for `runtime_env` only)."""
    names = {profile.api_key_env or "OPENAI_API_KEY"}
    fallback = profile.fallback()
    if fallback is not None:
        names.add(fallback.api_key_env or "OPENAI_API_KEY")
    return {name: os.environ[name] for name in sorted(names) if os.environ.get(name)}


class Shard:
    """Tasks handed to one actor: its concurrency share, its part of the budget, its stream."""

    def __init__(self, shard_id: int, actor_no: int, actor, indices: list[int], concurrency: int) -> None:
        self.shard_id = shard_id
        self.actor_no = actor_no
        self.actor = actor
        self.indices = indices
        self.concurrency = concurrency
        self.limit = concurrency
        self.task: asyncio.Task[None] | None = None
        self.lease_calls = 0
        self.allowance_usd: float | None = None
        """The part of the run's budget this shard may spend or reserve (its engine's own budget)."""

    @property
    def running(self) -> bool:
        return self.task is not None and not self.task.done()


class ActorPool:
    """The worker actors and their shared rate limiter (made on `ensure`, killed on `aclose`)."""

    def __init__(
        self,
        profile: ProviderProfile,
        base_url: str,
        *,
        timeout_s: float,
        rpm: int | None,
        tpm: int | None,
        size: int | None = None,
        forward_keys: bool = True,
    ) -> None:
        self.profile = profile
        self.base_url = base_url
        self.timeout_s = timeout_s
        self.rpm, self.tpm = rpm, tpm
        self.size = size or max(1, len([n for n in ray.nodes() if n.get("Alive")]))
        """How many actors to keep alive (default: one per alive node)."""
        self.forward_keys = forward_keys
        """Pass the key env vars the driver has to the actors (False: the nodes' environment has them)."""
        self.actors: list = []
        self.limiter = None
        self.lost = 0
        """Actors found dead during the run."""
        self._dead: set[int] = set()

    def alive(self) -> list[int]:
        return [i for i in range(len(self.actors)) if i not in self._dead]

    def ensure(self, *, paused: bool = False) -> None:
        """The limiter and `size` live actors (new ones `paused` when the run is)."""
        self.ensure_limiter()
        while len(self.alive()) < self.size:
            self.new_actor(paused=paused)

    def ensure_limiter(self):
        """The swarm's rate limiter actor (made on first use: the driver's own calls lease from it too)."""
        if self.limiter is None:
            # ray.remote makes the actor class at run time; mypy sees the undecorated class
            self.limiter = RateLimiter.remote(self.rpm, self.tpm)  # type: ignore[attr-defined]
        return self.limiter

    def new_actor(self, *, paused: bool = False) -> int:
        options: dict[str, Any] = {"scheduling_strategy": "SPREAD"}
        env = key_env(self.profile) if self.forward_keys else {}
        if env:
            options["runtime_env"] = {"env_vars": env}
        actor = SwarmWorker.options(**options).remote(  # type: ignore[attr-defined]  # a ray actor class
            self.profile, self.base_url, self.timeout_s, self.limiter
        )
        if paused:
            actor.pause.remote()
        self.actors.append(actor)
        return len(self.actors) - 1

    def mark_dead(self, actor_no: int) -> bool:
        """Remember a dead actor; True the first time (its other shards report it too)."""
        if actor_no in self._dead:
            return False
        self._dead.add(actor_no)
        self.lost += 1
        return True

    def broadcast(self, method: str, *args: Any) -> None:
        """Call `method` on every live actor (fire and forget)."""
        for actor_no in self.alive():
            getattr(self.actors[actor_no], method).remote(*args)

    def limiter_stats(self) -> dict[str, Any]:
        return ray.get(self.limiter.stats.remote()) if self.limiter is not None else {}

    async def ping(self) -> None:
        """Every actor has started (a benchmark's warm-up)."""
        await asyncio.gather(*(actor.ping.remote() for actor in self.actors))

    async def aclose(self) -> None:
        """Each live actor stops its tool servers and clients (`CLOSE_S` at most), then all are killed."""
        closing = [self.actors[actor_no].close.remote() for actor_no in self.alive()]
        if closing:
            try:
                await asyncio.wait_for(asyncio.gather(*closing, return_exceptions=True), CLOSE_S)
            except TimeoutError:
                pass  # killed below all the same
        self.kill()

    def kill(self) -> None:
        """Kill the actors and the limiter (a dead one is no error)."""
        for actor in [*self.actors, *([self.limiter] if self.limiter is not None else [])]:
            try:
                ray.kill(actor)
            except Exception:
                pass
        self.actors, self.limiter = [], None
        self._dead.clear()
