"""Which fault a request meets: a scripted marker in its messages, or a seeded random draw.

Scripted faults (markers in a user message: the first one carrying a marker)
    ``[[sim:CODE]]``      every request carrying it gets CODE;
    ``[[sim:CODExN]]``    only the first N requests carrying that message, then it is answered.
    CODE is one of:
      ``400``   context_length_exceeded (invalid_request_error, OpenAI's wording)
      ``401``   invalid_api_key
      ``403``   permission denied (unsupported_country_region_territory)
      ``404``   model_not_found
      ``408``, ``409``, ``422`` and any other 4xx: a generic error of that status
      ``429``   rate_limit_exceeded with retry-after: 1 / retry-after-ms: 100
      ``quota`` 429 insufficient_quota, no retry-after
      ``500``, ``502``, ``503``, ``504`` and any other 5xx: server_error
      ``hang``  no answer for ``hang_s`` (then 504)
      ``stall`` a stream that sends some chunks then stalls for ``hang_s`` (a plain
                request carrying it hangs)
      ``badjson`` a JSON answer wrapped in prose and a code fence, and cut short
      ``prose``   a plain-text answer even when JSON was asked for
    ``[[sim:CODE,CODE...]]``  a sequence: the first request gets the first, the next the
    second, and so on, then it is answered (``[[sim:hang,500]]``: a call that hangs, and its
    backup or retry fails with a 500).
    e.g. ``[[sim:500x2]]``, ``[[sim:429x1]]``, ``[[sim:hangx1]]``, ``[[sim:quota]]``.
    ``[[sim:tools=N]]``, ``[[sim:reasoning]]`` and ``[[sim:tokens=N]]`` are directives, not faults
    (``tools.py``); they combine with a fault marker in the same message.

Random faults (``SimConfig.error_rate``, ``hang_rate``, ``stream_stall_rate``)
    Drawn from the request's own draws (``draws.py``), after the rate limits: a 5xx (mostly 500
    and 503, some 502) answered after the drawn latency, a hang, or a stalled stream. A request
    a marker already hangs or stalls draws no other fault.

A fault that refuses the request is a ``Refusal``; one that spoils or delays the answer still
given (hang, stall, broken JSON, prose) is a flag of ``Faults``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from swarm_tui.sim import error_bodies
from swarm_tui.sim.config import SimConfig
from swarm_tui.sim.draws import Draws
from swarm_tui.sim.error_bodies import Refusal
from swarm_tui.sim.rate_limits import openai_duration, retry_after_headers
from swarm_tui.sim.tokens import content_text

__all__ = ["Marker", "marker_message", "find_marker", "Faults", "scripted_fault", "drawn_fault"]

#: what a scripted ``[[sim:429]]`` asks the client to wait
SCRIPTED_429_WAIT_S = 0.1

_CODE = r"(?:\d{3}|hang|stall|quota|badjson|prose)"
_MARKER = re.compile(rf"\[\[sim:({_CODE})(?:x(\d+)|((?:,{_CODE})+))?\]\]", re.IGNORECASE)


@dataclass(slots=True, frozen=True)
class Marker:
    code: str  # "500", "429", "quota", "hang", "stall", ...
    times: int | None  # None: always; N: only the first N sightings of the body
    then: tuple[str, ...] = ()
    """A sequence's codes after the first (`times` is then its length): one per sighting."""

    def applies(self, occurrence: int) -> bool:
        return self.times is None or occurrence < self.times

    def code_at(self, occurrence: int) -> str:
        """The fault of the body's `occurrence`-th sighting (one that `applies`)."""
        return self.then[occurrence - 1] if self.then and occurrence > 0 else self.code

    @property
    def status(self) -> int | None:
        return int(self.code) if self.code.isdigit() else None


def marker_message(messages: Sequence[Any]) -> str:
    """The first user message carrying a ``[[sim:...]]`` marker ('' when none does).

    Counting ``xN`` per this message, not per body, means a re-ask that appends to the
    conversation is still the same scripted task: ``[[sim:prosex1]]`` answers prose once.
    A message whose only markers are not faults (``[[sim:tools=N]]``, ``[[sim:reasoning]]``,
    see ``tools.py``) is passed over, so it does not hide a fault marker in a later message.
    """
    for m in messages:
        if isinstance(m, dict) and m.get("role") == "user":
            text = content_text(m.get("content"))
            if "[[sim:" in text.lower() and _MARKER.search(text):
                return text
    return ""


def find_marker(text: str) -> Marker | None:
    """The first ``[[sim:CODE]]`` / ``[[sim:CODExN]]`` marker in ``text``, if any."""
    if "[[sim:" not in text.lower():
        return None
    m = _MARKER.search(text)
    if m is None:
        return None
    if m.group(3):
        then = tuple(code.lower() for code in m.group(3)[1:].split(","))
        return Marker(m.group(1).lower(), 1 + len(then), then)
    return Marker(m.group(1).lower(), int(m.group(2)) if m.group(2) is not None else None)


@dataclass(slots=True)
class Faults:
    """What the faults do to an answer that is still given."""

    #: no answer for ``hang_s``, then a 504
    hang: bool = False
    #: a stream that sends some chunks, then stalls for ``hang_s``
    stall: bool = False
    #: a JSON answer wrapped in prose and a code fence, and cut short
    broken_json: bool = False
    #: a plain-text answer even when JSON was asked for
    prose: bool = False


def scripted_fault(
    code: str, *, stream: bool, model: str, config: SimConfig, prompt_tokens: int, max_tokens: int | None
) -> Refusal | Faults:
    """What the marker ``code`` does to a request it applies to: the error it answers, or how it
    spoils the answer (a ``stall`` of a plain request hangs it: there is no stream to stall)."""
    if code == "badjson":
        return Faults(broken_json=True)
    if code == "prose":
        return Faults(prose=True)
    if code == "hang" or (code == "stall" and not stream):
        return Faults(hang=True)
    if code == "stall":
        return Faults(stall=True)
    if code == "quota":
        return Refusal(error_bodies.insufficient_quota(), "quota")
    if code == "429":
        wait = SCRIPTED_429_WAIT_S
        limit = config.rpm or 60
        return Refusal(
            error_bodies.rate_limited("requests", model, limit, limit, 1, openai_duration(wait)),
            "rate_limited",
            retry_after_headers(wait),
        )
    return Refusal(
        error_bodies.for_status(int(code), model, config.context_window, prompt_tokens, max_tokens or 0), "scripted"
    )


def drawn_fault(config: SimConfig, draws: Draws, stream: bool) -> Literal["error", "hang", "stall"] | None:
    """The random fault of a request (None: it is answered), from its draws and the configured rates."""
    if draws.u_fault < config.error_rate:
        return "error"
    if draws.u_fault < config.error_rate + config.hang_rate:
        return "hang"
    if stream and draws.u_stall < config.stream_stall_rate:
        return "stall"
    return None
