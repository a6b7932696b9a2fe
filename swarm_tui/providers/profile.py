"""Provider profiles: where to send requests, with what model, key, limits and route.

A profile stores the *name* of the environment variable holding the key, never the key. The
key is read only when a client is built (`resolve_api_key`), and never stored on the profile,
so a profile can be printed, journaled or saved without leaking anything. The same holds for
extra headers: a header that carries a secret (`api-key`, `Authorization`, anything named like
a key, token or secret) names its env var in `headers_env`; `headers` refuses one (exit 2),
as `api_key_env` refuses a key, so the journal (which keeps the run's profile) never holds it.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any
from urllib.parse import parse_qsl, urlparse, urlsplit, urlunsplit

from swarm_tui.core.errors import InputError
from swarm_tui.core.tiers import SERVICE_TIERS
from swarm_tui.util import secrets

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
    """How calls are sent: `aiohttp` (default: chat calls on the project's own aiohttp path with the SDK's
    headers and auth, `providers.wire`; streaming and the Batch API through the SDK on aiohttp) or
    `httpx` (everything through the SDK on httpx2). Both follow the same route (`providers.transport`)."""
    headers: Mapping[str, str] = field(default_factory=dict, hash=False)
    """Extra headers sent on every call (OpenRouter's `X-Title`...); never a secret (see `headers_env`)."""
    headers_env: Mapping[str, str] = field(default_factory=dict, hash=False)
    """Headers whose value is read from an env var when a client is built: `{"api-key" = "AZURE_KEY"}`."""
    query: Mapping[str, str] = field(default_factory=dict, hash=False)
    """Query parameters sent on every call (Azure's `api-version`), besides any in `base_url`; never
    a secret (see `query_env`)."""
    query_env: Mapping[str, str] = field(default_factory=dict, hash=False)
    """Query parameters whose value is read from an env var when a client is built, for an endpoint
    that takes its secret in the URL: `{code = "AZURE_FUNCTION_KEY"}` (an Azure Functions key)."""
    proxy: str | None = None
    """The proxy for this profile's calls, instead of the environment's (HTTP(S)_PROXY, ALL_PROXY)."""
    ca_bundle: str | None = None
    """A PEM file (or directory) of the CAs to trust for this profile, instead of the default trust."""
    service_tier: str | None = None
    """The tier every chat call asks for, sent as the API's `service_tier` (`default`, `flex`: at the
    batch price, slower, sometimes unavailable; `priority`: faster, at a premium); None: nothing is
    sent (the provider's default). Billed at the tier the answer says served it (`core.tiers`)."""

    @property
    def is_simulator(self) -> bool:
        return self.name == SIM_PROFILE_NAME and not self.base_url

    def to_toml(self) -> dict[str, Any]:
        """The profile as a config table: only what is set, never a key (nor a header holding one)."""
        return {k: v for k, v in asdict(self).items() if k != "name" and v not in (None, "") and v != {}}

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
        for table_field in TABLE_FIELDS:
            if table_field in table and not isinstance(table[table_field], dict):
                raise InputError.single(
                    source, f"providers.{name}.{table_field}", 'must be a table, e.g. { "X-Title" = "my app" }'
                )
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
        if self.service_tier is not None and self.service_tier not in SERVICE_TIERS:
            return "service_tier", f"must be one of {', '.join(SERVICE_TIERS)}, not {self.service_tier!r}"
        return self._route_problem()

    def _route_problem(self) -> tuple[str, str] | None:
        """What is wrong with the headers, query, proxy or CA bundle; never repeats a value that
        may be a secret."""
        for name, value in self.headers.items():
            problem = header_problem(name, value)
            if problem:
                return f"headers.{name}", problem
        for name, env_name in self.headers_env.items():
            if not isinstance(name, str) or not HEADER_NAME.fullmatch(name):
                return f"headers_env.{name}", "not a header name (letters, digits and !#$%&'*+-.^_`|~)"
            problem = env_name_problem(env_name)
            if problem:
                return f"headers_env.{name}", problem
            if any(name.lower() == other.lower() for other in self.headers):
                return f"headers_env.{name}", "also set in headers: give the header in one of the two"
        for name, value in self.query.items():
            problem = query_problem(name, value)
            if problem:
                return f"query.{name}", problem
        for name, env_name in self.query_env.items():
            if not isinstance(name, str) or not name:
                return f"query_env.{name}", "not a parameter name"
            problem = env_name_problem(env_name)
            if problem:
                return f"query_env.{name}", problem
            if name in self.query:
                return f"query_env.{name}", "also set in query: give the parameter in one of the two"
        for name, value in parse_qsl(urlsplit(self.base_url).query, keep_blank_values=True):
            problem = query_problem(name, value)
            if problem:
                return "base_url", f"its query parameter {name!r}: {problem}"
        if self.proxy is not None:
            problem = proxy_problem(self.proxy)
            if problem:
                return "proxy", problem
        if self.ca_bundle is not None and (not isinstance(self.ca_bundle, str) or not self.ca_bundle.strip()):
            return "ca_bundle", "must be the path of a PEM file (or directory) of CA certificates"
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
            # the network's settings carry over; the headers, query and service tier are the primary's
            # dialect (an `api-key` header sent to another provider would hand it the primary's key)
            proxy=self.proxy,
            ca_bundle=self.ca_bundle,
        )


TABLE_FIELDS = ("headers", "headers_env", "query", "query_env")

HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""An HTTP header's name (RFC 9110 token)."""

SECRET_WORDS = ("key", "token", "secret", "auth", "password", "passwd", "cookie", "session", "signature", "credential")
"""A header or query parameter whose name holds one of these carries a secret: its value comes from an
env var (`headers_env`) and is masked wherever it is shown."""


def is_secret_name(name: str) -> bool:
    """Whether a header (or query parameter) named `name` carries a secret: `Authorization`, `api-key`,
    `x-api-key`, `X-Auth-Token`, `Cookie`..."""
    lowered = name.lower()
    return any(word in lowered for word in SECRET_WORDS)


def masked(name: str, value: str) -> str:
    """A header's value as it may be shown: masked when the header carries a secret."""
    return "***" if is_secret_name(name) or looks_like_secret(value) else value


def header_problem(name: object, value: object) -> str | None:
    """What is wrong with a `headers` entry, or None; never repeats the value."""
    if not isinstance(name, str) or not HEADER_NAME.fullmatch(name):
        return "not a header name (letters, digits and !#$%&'*+-.^_`|~)"
    if not isinstance(value, str):
        return f"must be a string, not a {type(value).__name__}"
    if any(c in value for c in "\r\n\0"):
        return "must be one line (no CR, LF or NUL)"
    if is_secret_name(name) or looks_like_secret(value):
        return (
            f"carries a secret (or a value that looks like one): put the value in an environment variable "
            f"and name it in headers_env, e.g. "
            f'headers_env = {{ "{name}" = "MY_KEY" }} (the value is not shown)'
        )
    return None


def query_problem(name: object, value: object) -> str | None:
    """What is wrong with a `query` entry (or one of `base_url`'s), or None; never repeats the value.

    A value that looks like a secret (a known key prefix, or a long random-looking token: an Azure
    Functions `code`, a hex access token) is refused whatever its parameter's name, as one whose
    name says it is a secret is: the profile is journaled with the run and its URL printed, so a
    secret there would be kept and shown. `query_env` sends it, read from the environment and
    masked wherever it could be written or shown; a value wrongly taken for a secret goes there too."""
    if not isinstance(name, str) or not name:
        return "not a parameter name"
    if not isinstance(value, str):
        return f'must be a string, not a {type(value).__name__} (quote it: "2024-10-21")'
    if is_secret_name(name) or looks_like_secret(value):
        return (
            "carries a secret (or a value that looks like one), which must not sit in the config or a URL: "
            f'put it in an environment variable and name it in query_env, e.g. query_env = {{ "{name}" = '
            '"MY_SECRET" }, or send it as a header named in headers_env (the value is not shown)'
        )
    return None


_HEX_TOKEN = re.compile(r"[0-9A-Fa-f]{32,}")
_TOKEN = re.compile(r"[A-Za-z0-9+/_\-.~]{24,}={0,2}")


def looks_like_secret(value: str) -> bool:
    """Whether `value` is probably a secret: a known key prefix, 32 or more hex digits (128 bits),
    or 24 or more characters of a token alphabet (base64, base64url, a JWT's) that mix upper case,
    lower case and digits as randomly as a generated token does. A version (`2024-10-21`), a model
    name, a region, a UUID (one letter case) or a name in camel case is none."""
    value = value.strip()
    if value.startswith(KEY_PREFIXES) or _HEX_TOKEN.fullmatch(value):
        return True
    if not _TOKEN.fullmatch(value):
        return False
    if not (any(c.isupper() for c in value) and any(c.islower() for c in value) and any(c.isdigit() for c in value)):
        return False
    kinds = [c.isupper() + 2 * c.islower() + 3 * c.isdigit() for c in value]
    switches = sum(a != b for a, b in zip(kinds, kinds[1:], strict=False))
    return switches >= 0.35 * len(value)  # a random token switches about 6 times in 10; words, 2 or 3


PROXY_SCHEMES = ("http", "https", "socks5", "socks5h")


def proxy_problem(url: object) -> str | None:
    """What is wrong with a profile's `proxy`, or None; never repeats the URL."""
    if not isinstance(url, str):
        return "must be a proxy URL such as http://proxy.example:3128"
    if has_credentials(url):
        return (
            "must not carry credentials (user:password@host): they would be stored with the run; give the "
            "proxy with its credentials in HTTPS_PROXY or ALL_PROXY instead (the value is not shown)"
        )
    parsed = urlparse(url.strip())
    if parsed.scheme not in PROXY_SCHEMES or not parsed.hostname:
        return f"must be a proxy URL ({', '.join(s + '://' for s in PROXY_SCHEMES)}), e.g. http://proxy.example:3128"
    return None


def split_query(url: str) -> tuple[str, dict[str, str]]:
    """`url` without its query string, and that query as a dict: a base URL of
    `.../openai?api-version=...` sends `api-version` on every call, not glued before `/chat/completions`."""
    parts = urlsplit(url)
    if not parts.query:
        return url.rstrip("/"), {}
    base = urlunsplit((parts.scheme, parts.netloc, parts.path, "", "")).rstrip("/")
    return base, dict(parse_qsl(parts.query, keep_blank_values=True))


def resolve_headers(profile: ProviderProfile) -> dict[str, str]:
    """The profile's extra headers, those of `headers_env` read from their env vars now (InputError,
    naming the variable, when one is not set)."""
    headers = dict(profile.headers)
    for name, env_name in profile.headers_env.items():
        value = os.environ.get(env_name, "")
        if not value:
            raise InputError.single(
                f"provider {profile.name!r}",
                f"headers_env.{name}",
                f"environment variable {env_name} is not set (it should hold the value of the {name} header)",
            )
        problem = value_problem(value)
        if problem:
            raise InputError.single(
                f"provider {profile.name!r}",
                f"headers_env.{name}",
                f"environment variable {env_name} {problem} (the value is not shown)",
            )
        secrets.register(value)  # masked from now on, as the key is (a provider may echo it)
        headers[name] = value
    return headers


def resolve_query(profile: ProviderProfile) -> dict[str, str]:
    """The query parameters of `query_env`, read from their env vars now and masked from then on
    (InputError, naming the variable, when one is not set or is not one line)."""
    query: dict[str, str] = {}
    for name, env_name in profile.query_env.items():
        value = os.environ.get(env_name, "")
        if not value:
            raise InputError.single(
                f"provider {profile.name!r}",
                f"query_env.{name}",
                f"environment variable {env_name} is not set (it should hold the value of the {name} parameter)",
            )
        secrets.register(value)
        problem = value_problem(value)
        if problem:
            raise InputError.single(
                f"provider {profile.name!r}",
                f"query_env.{name}",
                f"environment variable {env_name} {problem} (the value is not shown)",
            )
        query[name] = value
    return query


_CONTROL_NAMES = {"\r": "a carriage return", "\n": "a line feed", "\t": "a tab", "\0": "a NUL"}


def value_problem(value: str) -> str | None:
    """What is wrong with a key's (or a secret header's) value read from its variable, or None:
    a control character, which no HTTP header may carry. Never repeats the value.

    A `.env` file saved with Windows line endings leaves a carriage return at the end of every
    value; sent, every call fails on its header ("Forbidden control character") and is retried,
    and nothing names the variable."""
    bad = "".join(dict.fromkeys(c for c in value if ord(c) < 32 or ord(c) == 127))
    if not bad:
        return None
    trailing = value[len(value.rstrip(bad)) :]
    if not any(c in bad for c in value.rstrip(bad)):  # only at the end: a line ending
        ends = " and ".join(_control_name(c) for c in trailing)
        why = "a .env file saved with Windows line endings?" if "\r" in trailing else "a line ending read with it?"
        return f"ends with {ends} ({why}): remove it, a key is one line"
    return f"holds {', '.join(_control_name(c) for c in bad)}, which no HTTP header may carry"


def _control_name(char: str) -> str:
    return _CONTROL_NAMES.get(char, f"a control character (U+{ord(char):04X})")


ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""What `api_key_env` may hold: the name of an environment variable, never a key."""

KEY_PREFIXES = ("sk-", "sk_", "gsk_", "xai-", "AIza", "nvapi-", "pplx-", "Bearer ", "bearer ")
"""How the keys of the providers users run against begin."""


def looks_like_key(value: str) -> bool:
    """Whether `value` is probably a key rather than an env var's name.

    Keys are `sk-...`, `sk-proj-...`, `xai-...` (a `-`: never in a name) or one long random run
    of letters and digits (`gsk_...`, some `AIza...`, hex keys); names are words joined by `_`.
    """
    value = value.strip()
    if value.startswith(KEY_PREFIXES):
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
        problem = value_problem(key)
        if problem:
            raise InputError.single(
                f"provider {profile.name!r}", "api_key_env", f"environment variable {env_name} {problem}"
            )
        return key
    if profile.is_simulator or is_loopback_url(base_url):
        return NO_KEY_PLACEHOLDER
    raise InputError.single(
        f"provider {profile.name!r}",
        "api_key_env",
        f"environment variable {env_name} is not set (it should hold the API key for {base_url})",
    )


def key_status(profile: ProviderProfile) -> str:
    """`set`, `missing` or `not needed` (`invalid name`, `not one line`), for the provider pane and
    `providers list`; never the key itself."""
    env_name = profile.api_key_env or "OPENAI_API_KEY"
    if env_name_problem(env_name):
        return "invalid name"
    key = os.environ.get(env_name)
    if key:
        return "not one line" if value_problem(key) else "set"
    if profile.is_simulator or (profile.base_url and is_loopback_url(profile.base_url)):
        return "not needed"
    return "missing"
