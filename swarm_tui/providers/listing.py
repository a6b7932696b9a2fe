"""What `swarm-tui providers` shows of a profile: where it sends, with what, by which route.

Nothing shown holds a secret: a key is shown by its env var's name and whether it is set, a
header from `headers_env` and a query parameter from `query_env` the same way, and the value of
any header named like a secret is masked (`headers` refuses one when the config is read; the mask
is the second lock).
"""

from __future__ import annotations

import os

from swarm_tui.core.errors import InputError
from swarm_tui.providers.profile import ProviderProfile, key_status, masked
from swarm_tui.providers.transport import route_for


def profile_lines(name: str, profile: ProviderProfile, *, default: bool) -> list[str]:
    """The profile's first line (URL, model, key), then one indented line per extra setting."""
    url = "embedded simulator (SIMULATED)" if profile.is_simulator else profile.base_url
    key = profile.api_key_env or "OPENAI_API_KEY"
    model = profile.model or "(the job's)"
    lines = [f"{name}{' (default)' if default else ''}: {url}  model {model}  key {key}: {key_status(profile)}"]
    if profile.backend != "aiohttp":
        lines.append(f"    backend: {profile.backend}")
    if profile.service_tier is not None:
        lines.append(f"    service tier: {profile.service_tier}")
    if profile.headers:
        lines.append("    headers: " + ", ".join(f"{k}: {masked(k, v)}" for k, v in profile.headers.items()))
    if profile.headers_env:
        shown = (f"{k}: ${v} ({'set' if os.environ.get(v) else 'missing'})" for k, v in profile.headers_env.items())
        lines.append("    headers from the environment: " + ", ".join(shown))
    if profile.query:
        lines.append("    query: " + "&".join(f"{k}={masked(k, v)}" for k, v in profile.query.items()))
    if profile.query_env:
        shown = (f"{k}: ${v} ({'set' if os.environ.get(v) else 'missing'})" for k, v in profile.query_env.items())
        lines.append("    query from the environment: " + ", ".join(shown))
    if not profile.is_simulator:
        try:
            lines.append(f"    route: {route_for(profile, profile.base_url).describe()}")
        except InputError as exc:
            lines.append(f"    route: cannot be used: {exc}")
    return lines
