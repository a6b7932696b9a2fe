"""Service tiers: how fast a provider serves a live call, and so at which rate it bills it.

OpenAI's `service_tier` (and the relays copying it) asks for `default` (standard processing),
`flex` (slower, sometimes unavailable, billed at the Batch API's rates but answered
synchronously) or `priority` (faster, at a premium). The answer's own `service_tier` says which
tier actually served the call, and that is the one billed: a priority request the provider
downgraded says `default`. The batch lane is a fourth way tokens are billed (`batch`), named here
so that a bill can be split by tier and lane in one vocabulary (`tier_of`).

An answer that does not say which tier served it (most relays, local servers) is billed at the
dearer of the tier asked for and the default: flex asked is billed at the default rate (a flex
request a relay ignored is a default one), priority asked at the priority rate (a ceiling errs
high, never low).
"""

from __future__ import annotations

from typing import Any

from swarm_tui.core.lanes import is_batch_endpoint

DEFAULT = "default"
FLEX = "flex"
PRIORITY = "priority"
BATCH_TIER = "batch"
"""The batch lane's tokens, as a tier of the bill (never sent as a `service_tier`)."""

SERVICE_TIERS = (DEFAULT, FLEX, PRIORITY)
"""What `--service-tier` and a profile's `service_tier` may ask for."""
BILLED_TIERS = (DEFAULT, FLEX, PRIORITY, BATCH_TIER)
"""Every tier a bill is split by, in the order it is shown."""

_SAME_AS_DEFAULT = frozenset({"default", "auto", "standard", "on_demand"})
"""What providers answer for the standard tier (`auto` resolved, Groq's `on_demand`)."""


def served_tier(value: Any) -> str | None:
    """The tier an answer's `service_tier` says served it; None when it says nothing we know."""
    if not isinstance(value, str):
        return None
    value = value.strip().lower()
    if value in _SAME_AS_DEFAULT:
        return DEFAULT
    return value if value in (FLEX, PRIORITY) else None


def billed_tier(asked: str | None, served: str | None) -> str:
    """The tier a live call is billed at: the one that served it when the answer says, else the
    dearer of the one asked for and the default (see the module's docstring)."""
    if served is not None:
        return served
    return PRIORITY if asked == PRIORITY else DEFAULT


def asked_tier(body: dict[str, Any]) -> str | None:
    """The tier a request body asks for (its `service_tier`), None for the default."""
    tier = served_tier(body.get("service_tier"))
    return None if tier in (None, DEFAULT) else tier


def tier_of(endpoint: str | None, service_tier: str | None) -> str:
    """How an attempt's tokens were billed: `batch` for a batch-lane line, else its service tier."""
    if endpoint and is_batch_endpoint(endpoint):
        return BATCH_TIER
    return service_tier or DEFAULT
