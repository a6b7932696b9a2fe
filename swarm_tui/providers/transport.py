"""One route for every call of a client: its proxy, its TLS trust and its connection pool.

Resolved once, when a `ProviderClient` is made, and handed to every way a call can leave: the
aiohttp hot path (`wire.AiohttpChat`) and the SDK's own client (streaming, the Batch API and
the whole `httpx` backend). One run never sends some prompts through a proxy and others around
it, nor trusts one CA for chat calls and another for batches.

* **Proxy**: the profile's `proxy` when it has one, else the environment's, picked by httpx2's
  own code (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY` in either case, `NO_PROXY`), as the SDK
  does. An `https://` proxy is spoken to over TLS on both backends (aiohttp 3.14 supports it on
  Python 3.11+). SOCKS works on the `httpx` backend with `socksio` installed; anywhere else it
  is refused when the run starts (exit 2), never silently bypassed.
* **TLS trust**: the context the SDK builds (httpx2's `create_ssl_context`: `SSL_CERT_FILE`,
  `SSL_CERT_DIR`, the OS trust store through truststore on macOS and Windows, else OpenSSL's
  paths), or the profile's `ca_bundle` instead of it. An https proxy is verified the same way.
* **Pool**: no cap on connections. The engine's admission is the one limit on calls in flight
  (the concurrency ceiling, its hedges, the judge's own); a pool capped below it would queue
  calls whose attempt and straggler clocks already run, and the ceiling moves while a run goes
  (the TUI, the adaptive limit). Idle connections are kept for reuse up to the keep-alive expiry.
"""

from __future__ import annotations

import importlib.util
import os
import ssl
from dataclasses import dataclass
from typing import Any

import aiohttp
import httpx2
import openai
from yarl import URL

from swarm_tui.core.errors import InputError
from swarm_tui.providers.body import capped_error_bodies
from swarm_tui.providers.private_apis import environment_proxy
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.util import secrets

KEEPALIVE_EXPIRY_S = 15.0
"""How long an idle connection is kept for the next call (aiohttp's own default)."""


@dataclass(frozen=True)
class Route:
    """Where a client's calls go and whom they trust; the same for both backends."""

    proxy: httpx2.Proxy | None
    """The proxy every call goes through (its credentials apart, in `auth`), or None: direct."""
    proxy_source: str
    """Where the proxy came from, for `swarm-tui providers`: "the profile", "the environment"."""
    ssl_context: ssl.SSLContext
    trust: str
    """What the TLS context trusts, in words: "ca_bundle /path", "SSL_CERT_FILE /path", "the system's"."""

    @property
    def secrets(self) -> tuple[str, ...]:
        """The proxy's password, to mask wherever an error could echo it."""
        return (self.proxy.auth[1],) if self.proxy is not None and self.proxy.auth else ()

    def describe(self) -> str:
        """The route in a line: `direct` or `via proxy URL (where it came from)`, and the trust."""
        way = "direct" if self.proxy is None else f"via proxy {self.proxy.url} ({self.proxy_source})"
        return f"{way}; TLS trust: {self.trust}"

    # ----------------------------------------------------------------- the SDK's client

    def sdk_http_client(self, backend: str, *, max_error_bytes: int | None = None) -> httpx2.AsyncClient:
        """The SDK's HTTP client on `backend`, on this route: nothing left to the environment
        (`trust_env=False`: the proxy and trust were resolved here, once) and never following a
        redirect (httpx turns a POST into a GET on 302/303, and a 307 would send the prompts and the
        key to another origin: a 3xx fails the attempt as `redirect`). `max_error_bytes`: an error
        answer's body is cut there (the SDK reads it whole before it raises)."""
        kwargs: dict[str, Any] = {
            "follow_redirects": False,
            "trust_env": False,
            "verify": self.ssl_context,
            "proxy": self.proxy,
        }
        if max_error_bytes is not None:
            kwargs["event_hooks"] = {"response": [capped_error_bodies(max_error_bytes)]}
        if backend == "aiohttp":
            # the vendored aiohttp transport gives `max_connections` to aiohttp's connector as its
            # `limit`, where 0 is no limit (None would mean aiohttp's default of 100)
            limits = httpx2.Limits(max_connections=0, keepalive_expiry=KEEPALIVE_EXPIRY_S)
            return openai.DefaultAioHttpClient(**kwargs, limits=limits)
        limits = httpx2.Limits(
            max_connections=None, max_keepalive_connections=None, keepalive_expiry=KEEPALIVE_EXPIRY_S
        )
        return openai.DefaultAsyncHttpx2Client(**kwargs, limits=limits)

    # ----------------------------------------------------------------- the aiohttp hot path

    @property
    def aiohttp_proxy(self) -> URL | None:
        return URL(str(self.proxy.url)) if self.proxy is not None else None

    @property
    def proxy_authorization(self) -> str | None:
        """The `Proxy-Authorization` value for the proxy's credentials, if it has any."""
        if self.proxy is None or not self.proxy.auth:
            return None
        return aiohttp.encode_basic_auth(*self.proxy.auth)

    def aiohttp_connector(self) -> aiohttp.TCPConnector:
        """A pool on this route's trust, uncapped (see the module's docstring); call it in the loop."""
        return aiohttp.TCPConnector(limit=0, ssl=self.ssl_context, keepalive_timeout=KEEPALIVE_EXPIRY_S)


def route_for(profile: ProviderProfile, url: str) -> Route:
    """The route of `profile`'s calls to `url`; InputError (exit 2, before anything is sent) for a
    proxy the backend cannot speak, or a trust that cannot be read."""
    proxy_url, source = (profile.proxy, "the profile") if profile.proxy else (environment_proxy(url), "the environment")
    proxy = _proxy(profile, proxy_url, source) if proxy_url else None
    context, trust = _ssl_context(profile)
    if proxy is not None and proxy.url.scheme == "https":
        proxy = httpx2.Proxy(proxy.url, auth=proxy.auth, ssl_context=context)
    route = Route(proxy, source, context, trust)
    for secret in route.secrets:
        secrets.register(secret)  # a proxy that echoes its credentials: masked as the key is
    return route


def _proxy(profile: ProviderProfile, url: str, source: str) -> httpx2.Proxy:
    field = "proxy" if source == "the profile" else "HTTPS_PROXY / HTTP_PROXY / ALL_PROXY"
    where = f"provider {profile.name!r}" if source == "the profile" else "the environment"
    try:
        proxy = httpx2.Proxy(url)
    except (ValueError, TypeError, httpx2.InvalidURL):
        raise InputError.single(
            where, field, "not a proxy URL (http://, https://, socks5://, socks5h://; the value is not shown)"
        ) from None
    if proxy.url.scheme.startswith("socks"):
        if profile.backend == "aiohttp":
            raise InputError.single(
                where,
                field,
                f"a SOCKS proxy ({source}) cannot carry the aiohttp backend's calls: use --backend httpx "
                "(with the socksio package: pip install 'swarm-tui[socks]'), or an http:// or https:// proxy",
            )
        if importlib.util.find_spec("socksio") is None:
            raise InputError.single(
                where, field, f"a SOCKS proxy ({source}) needs the socksio package: pip install 'swarm-tui[socks]'"
            )
    return proxy


def _ssl_context(profile: ProviderProfile) -> tuple[ssl.SSLContext, str]:
    """The profile's CA bundle, else the context the SDK would build (and what it trusts, in words)."""
    if profile.ca_bundle:
        path = os.path.expanduser(profile.ca_bundle)
        where, field, trust = f"provider {profile.name!r}", "ca_bundle", f"ca_bundle {path}"
        try:
            context = (
                ssl.create_default_context(capath=path)
                if os.path.isdir(path)
                else ssl.create_default_context(cafile=path)
            )
        except (OSError, ssl.SSLError, ValueError) as exc:
            problem = f"cannot be read as CA certificates ({path}): {_reason(exc)}"
            raise InputError.single(where, field, problem) from None
        return context, trust
    for variable in ("SSL_CERT_FILE", "SSL_CERT_DIR"):
        if os.environ.get(variable):  # httpx2 reads these, in this order
            where, field, trust = "the environment", variable, f"{variable} {os.environ[variable]}"
            break
    else:
        where, field, trust = "the environment", "SSL_CERT_FILE", "the system's"
    try:
        return httpx2.create_ssl_context(verify=True, trust_env=True), trust
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise InputError.single(where, field, f"cannot be read as CA certificates: {_reason(exc)}") from None


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or getattr(exc, "reason", None) or str(exc) or type(exc).__name__
