"""`providers test NAME` and the provider pane's "test connection": one tiny real call."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from swarm_tui.core.errors import InputError
from swarm_tui.providers.client import ProviderClient
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.util import secrets

PROBE_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class ProbeResult:
    profile: str
    base_url: str
    ok: bool
    latency_ms: float | None
    detail: str

    def describe(self) -> str:
        """One line for `providers test` and the provider pane; a key the endpoint echoed masked."""
        if self.ok:
            return secrets.mask(f"{self.profile}: OK in {self.latency_ms:.0f} ms ({self.base_url}; {self.detail})")
        return secrets.mask(f"{self.profile}: FAILED ({self.base_url}): {self.detail}")


async def probe_profile(
    profile: ProviderProfile, *, base_url: str | None = None, model: str | None = None
) -> ProbeResult:
    """Send one `max_tokens=1` chat call; for the simulator, to a simulator started for the probe."""
    sim = None
    if profile.is_simulator and base_url is None:
        from swarm_tui.sim import SimConfig, SimServer

        sim = SimServer(SimConfig(latency_ms=20.0)).start(mode="thread")
        base_url = sim.base_url
    base_url = base_url or profile.base_url
    model = model or profile.model or "probe"
    try:
        client = ProviderClient(profile, base_url, attempt_timeout_s=PROBE_TIMEOUT_S)
    except InputError as exc:
        return ProbeResult(profile.name, base_url, False, None, str(exc))
    started = time.monotonic()
    try:
        async with asyncio.timeout(PROBE_TIMEOUT_S):
            result = await client.complete(
                {"model": model, "messages": [{"role": "user", "content": "ping"}], "max_tokens": 1}
            )
        latency = (time.monotonic() - started) * 1000
        return ProbeResult(
            profile.name,
            base_url,
            True,
            latency,
            f"model {result.body.get('model', model)}, request {result.request_id}",
        )
    except Exception as exc:
        error = client.classify(exc)
        return ProbeResult(
            profile.name,
            base_url,
            False,
            None,
            f"{error.kind}{f' {error.status}' if error.status else ''}: {error.message}",
        )
    finally:
        await client.aclose()
        if sim is not None:
            sim.stop()
