"""Whether a run's endpoints can be reached at all: a run where no call ever connects stops early,
saying why.

A connection error is retried (a blip heals), so a base URL with a typo, a server not started, a
name that does not resolve or a TLS handshake that never succeeds would otherwise spend every
task's attempts on it and end with "40 failed, 160 sent, 0 5xx, 0 timeouts" and no cause. Once
`REFUSALS_TO_STOP` calls in a row to an endpoint that has never answered anything (any HTTP
status is an answer: it connected) failed to connect, and no fallback can take them, dispatch
stops, resumable, naming the endpoint and the cause (connection refused, DNS, TLS, reset,
connect timeout) in the log and in summary.json's `stopped`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from swarm_tui.core.call_errors import CallError, ErrorClass
from swarm_tui.engine.settings import REFUSALS_TO_STOP

if TYPE_CHECKING:
    from swarm_tui.engine.lanes.live import LiveLane
    from swarm_tui.providers.client import ProviderClient

CAUSES = (
    (("Connection refused", "Connect call failed", "ConnectionRefusedError"), "connection refused"),
    (
        (
            "ClientConnectorDNSError",
            "Name or service not known",
            "nodename nor servname",
            "getaddrinfo",
            "Temporary failure in name resolution",
            "No address associated",
        ),
        "the name does not resolve (DNS)",
    ),
    (("SSLError", "SSLCertVerification", "certificate", "[SSL", "handshake"), "the TLS handshake failed"),
    (
        ("reset by peer", "ConnectionResetError", "Server disconnected", "RemoteProtocolError"),
        "the connection was reset",
    ),
    (("timed out", "Timeout", "ConnectTimeout"), "the connection timed out"),
)
"""Words of a connection error and what they mean, the most telling first (aiohttp names `ssl:default`
in every error of a plain connection: it is no TLS failure)."""


def connection_cause(error: CallError) -> str:
    """What a connection error says went wrong, in a person's words."""
    message = error.message
    for words, cause in CAUSES:
        if any(word.lower() in message.lower() for word in words):
            return cause
    return "no connection"


class Reachability:
    """Calls that never connected, by endpoint, since it last answered (see the module doc)."""

    def __init__(self, lane: LiveLane) -> None:
        self.lane = lane
        self._answered: set[str] = set()
        self._failed: dict[str, int] = {}

    def observe(self, client: ProviderClient, error: CallError | None) -> None:
        name = client.name
        if error is None or error.status is not None:  # an HTTP answer of any kind: it connects
            self._answered.add(name)
            self._failed.pop(name, None)
            return
        if error.kind is not ErrorClass.CONNECTION or name in self._answered:
            return
        failed = self._failed[name] = self._failed.get(name, 0) + 1
        engine = self.lane.engine
        if failed < REFUSALS_TO_STOP or engine.stopping is not None or self.lane.endpoints.can_fail_over(name):
            return
        engine.stop_dispatch(
            f"no call to {name} ({client.base_url}) ever connected: {connection_cause(error)} "
            f"({failed} in a row; the last: {error.message[:200]}); nothing more is sent: check the base URL, "
            "that the server runs, the network, proxy and TLS trust, then `swarm-tui resume` the run"
        )
