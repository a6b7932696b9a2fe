"""Provider profiles: where to send requests, with what model, key and limits.

A profile stores the *name* of the environment variable holding the key, never the key. The
key is read only when a client is built (`resolve_api_key`), and never stored on the profile,
so a profile can be printed, journaled or saved without leaking anything.
"""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import asdict, dataclass, fields, replace
from typing import Any
from urllib.parse import urlparse

from .. import secrets
from ..errors import InputError

SIM_PROFILE_NAME = "sim"
NO_KEY_PLACEHOLDER = "sk-no-key-required"
"""Sent to loopback servers that need no key (the SDK insists on some string)."""


@dataclass(frozen=True)
class ProviderProfile:
    name: str
    base_url: str = ""
    """Empty for the built-in simulator: its URL is known once it has started."""
    model: str | None = None
    api_key_env: str | None = None
    concurrency: int | None = None
    rpm: int | None = None
    tpm: int | None = None
    timeout: float | None = None
    fallback_base_url: str | None = None
    fallback_model: str | None = None
    fallback_api_key_env: str | None = None
    backend: str = "aiohttp"
    """How chat calls are sent: `aiohttp` (default: one aiohttp session with the SDK's headers and auth,
    `providers.wire`) or `httpx` (the SDK's own request path). Streaming and the Batch API use the SDK."""

    @property
    def is_simulator(self) -> bool:
        return self.name == SIM_PROFILE_NAME and not self.base_url

    def to_toml(self) -> dict[str, Any]:
        """The profile as a config table: only what is set, never a key."""
        return {k: v for k, v in asdict(self).items() if k != "name" and v not in (None, "")}

    @classmethod
    def from_toml(cls, name: str, table: dict[str, Any], *, source: str) -> ProviderProfile:
        known = {f.name for f in fields(cls)} - {"name"}
        unknown = set(table) - known
        if unknown:
            raise InputError.single(
                source, f"providers.{name}.{sorted(unknown)[0]}", f"unknown setting (known: {', '.join(sorted(known))})"
            )
        if "api_key" in table:
            raise InputError.single(source, f"providers.{name}.api_key", "store the env var name in api_key_env")
        profile = cls(name=name, **table)
        problem = profile.problem()
        if problem:
            raise InputError.single(source, f"providers.{name}.{problem[0]}", problem[1])
        return profile

    def problem(self) -> tuple[str, str] | None:
        """The first thing wrong with this profile, as (field, message).

        A message never repeats a URL or key-env value: a user who pastes a key in the wrong
        place must not see it echoed on screen, in a log or in a CI transcript.
        """
        for env_field in ("api_key_env", "fallback_api_key_env"):
            value = getattr(self, env_field)
            if value not in (None, ""):  # unset: OPENAI_API_KEY, as the SDK does
                problem = env_name_problem(value)
                if problem:
                    return env_field, problem
        for url_field in ("base_url", "fallback_base_url"):
            url = getattr(self, url_field)
            if url:
                problem = url_problem(url)
                if problem:
                    return url_field, problem
        for int_field in ("concurrency", "rpm", "tpm"):
            value = getattr(self, int_field)
            if value is not None and (not isinstance(value, int) or value < 1):
                return int_field, f"must be a positive integer, not {value!r}"
        if self.timeout is not None and (not isinstance(self.timeout, (int, float)) or self.timeout <= 0):
            return "timeout", f"must be a positive number of seconds, not {self.timeout!r}"
        if self.backend not in ("httpx", "aiohttp"):
            return "backend", f"must be 'httpx' or 'aiohttp', not {self.backend!r}"
        return None

    def with_overrides(self, **overrides: Any) -> ProviderProfile:
        return replace(self, **{k: v for k, v in overrides.items() if v is not None})

    def fallback(self) -> ProviderProfile | None:
        """The secondary endpoint as a profile of its own, if one is configured."""
        if not self.fallback_base_url:
            return None
        return ProviderProfile(
            name=f"{self.name}/fallback",
            base_url=self.fallback_base_url,
            model=self.fallback_model or self.model,
            api_key_env=self.fallback_api_key_env or self.api_key_env,
            concurrency=self.concurrency,
            timeout=self.timeout,
            backend=self.backend,
        )


ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""What `api_key_env` may hold: the name of an environment variable, never a key."""


def looks_like_key(value: str) -> bool:
    """Whether `value` is probably a key rather than an env var's name.

    Keys are `sk-...`, `sk-proj-...`, `xai-...` (a `-`: never in a name) or one long random run
    of letters and digits (`gsk_...`, some `AIza...`, hex keys); names are words joined by `_`.
    """
    value = value.strip()
    if value.startswith(("sk-", "sk_", "gsk_", "xai-", "AIza", "nvapi-", "pplx-", "Bearer ", "bearer ")):
        return True
    if ENV_NAME.fullmatch(value) is None:
        return len(value) >= 16 and " " not in value
    return any(len(part) >= 32 or (len(part) >= 20 and any(c.isdigit() for c in part)) for part in value.split("_"))


def env_name_problem(value: object) -> str | None:
    """What is wrong with `value` as a key env var's name, or None; never repeats the value."""
    if isinstance(value, str) and ENV_NAME.fullmatch(value) and not looks_like_key(value):
        return None
    if isinstance(value, str) and looks_like_key(value):
        return (
            "looks like an API key, not the name of an environment variable: put the key in one "
            "(export RELAY_KEY=...) and give its name, e.g. RELAY_KEY (the value is not shown)"
        )
    return (
        "must be the name of an environment variable holding the key: letters, digits and _, "
        "not starting with a digit, e.g. OPENAI_API_KEY (the value is not shown)"
    )


def has_credentials(url: str) -> bool:
    """Whether `url` carries userinfo (`https://user:key@host`), where a key must never be."""
    try:
        return "@" in urlparse(url.strip()).netloc
    except ValueError:
        return "@" in url


def url_problem(url: object) -> str | None:
    """What is wrong with `url` as a base URL, or None; never repeats the URL, which may hold a key."""
    if not isinstance(url, str):
        return "not an http(s) URL: expected e.g. https://api.example.com/v1"
    try:
        parsed = urlparse(url.strip())
        parsed.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError:
        parsed = None
    if has_credentials(url):
        return (
            "must not carry credentials (user:key@host): put the key in an environment variable and "
            "name it in api_key_env (the value is not shown)"
        )
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.netloc:
        return (
            "not an http(s) URL: expected e.g. https://api.example.com/v1 "
            "(the value is not shown, in case it holds a key)"
        )
    return None


def is_loopback_url(url: str) -> bool:
    host = urlparse(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def resolve_api_key(profile: ProviderProfile, base_url: str) -> str:
    """The key for `profile`, read from its env var now; loopback servers need none."""
    env_name = profile.api_key_env or "OPENAI_API_KEY"
    problem = env_name_problem(env_name)
    if problem:  # a profile that skipped `problem()` (an old journal's): never echo what it holds
        raise InputError.single(f"provider {profile.name!r}", "api_key_env", problem)
    key = os.environ.get(env_name, "")
    if key:
        secrets.register(key)  # masked from now on in everything written or shown
        return key
    if profile.is_simulator or is_loopback_url(base_url):
        return NO_KEY_PLACEHOLDER
    raise InputError.single(
        f"provider {profile.name!r}",
        "api_key_env",
        f"environment variable {env_name} is not set (it should hold the API key for {base_url})",
    )


def key_status(profile: ProviderProfile) -> str:
    """`set`, `missing` or `not needed`, for the provider pane; never the key itself."""
    env_name = profile.api_key_env or "OPENAI_API_KEY"
    if env_name_problem(env_name):
        return "invalid name"
    if os.environ.get(env_name):
        return "set"
    if profile.is_simulator or (profile.base_url and is_loopback_url(profile.base_url)):
        return "not needed"
    return "missing"
