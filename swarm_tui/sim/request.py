"""Who may ask and what was asked: a chat request read and checked as OpenAI checks it.

The first two stages of ``Simulator.chat``: the endpoint's refusals (down: 503; a missing or
wrong key when ``require_key`` is set: 401, the files and batches routes answer the same), then
the body (400, OpenAI's wording: not JSON, not an object, no model, no messages, a bad
``max_tokens``, bad tools or tool messages, a ``service_tier`` OpenAI does not know). What passes
is a ``ChatRequest``; ``Call`` carries it on through the later stages with what the simulator
learned of it (its body's hash and how often that body was seen, its prompt and prompt tokens,
whether a judge asked).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from swarm_tui.sim import error_bodies
from swarm_tui.sim.config import SimConfig
from swarm_tui.sim.error_bodies import Refusal
from swarm_tui.sim.judging import JudgeRequest
from swarm_tui.sim.tool_request import ToolRequest, check_tool_messages, parse_tools

__all__ = ["ChatRequest", "Call", "endpoint_refusal", "read_chat_request", "SERVICE_TIERS"]

SERVICE_TIERS = ("auto", "default", "flex", "scale", "priority")
"""What OpenAI accepts as a request's ``service_tier`` (``auto`` and ``scale`` are served at the default)."""

_NOT_JSON = (
    "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP "
    "library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON."
)


@dataclass(slots=True, frozen=True)
class ChatRequest:
    """A chat-completions body that a real endpoint would accept."""

    body: dict[str, Any]
    model: str
    messages: list[Any]
    #: ``max_completion_tokens``, else ``max_tokens`` (None: neither)
    max_tokens: int | None
    #: the tools offered (None: none)
    tools: ToolRequest | None
    stream: bool
    #: a stream's last chunk carries the usage (``stream_options.include_usage``)
    include_usage: bool
    #: the tier that serves it, as its answer says: ``default``, ``flex`` or ``priority``
    service_tier: str = "default"


@dataclass(slots=True)
class Call:
    """One chat request on its way through ``Simulator.chat``: what was asked, and what is known."""

    request: ChatRequest
    request_id: str
    #: the reply's headers so far (``x-request-id``, then the rate-limit headers)
    headers: dict[str, str]
    #: SHA-256 of the body without its stream options, and how many times it was seen before
    key: str
    occurrence: int
    #: the last user message (the counters' key)
    prompt: str
    prompt_tokens: int
    judged: JudgeRequest | None


def endpoint_refusal(config: SimConfig, authorization: str | None) -> tuple[int, dict[str, Any]] | None:
    """The error an endpoint answers any request with before reading it (down: 503; a wrong or
    missing key when ``require_key`` is set: 401), else None. The key is never echoed."""
    if config.down:
        return error_bodies.server_error(503)
    if config.require_key is not None:
        if not authorization:
            return error_bodies.invalid_api_key(True)
        if authorization != "Bearer " + config.require_key:
            return error_bodies.invalid_api_key(False)
    return None


def read_chat_request(raw: bytes) -> ChatRequest | Refusal:
    """The request in ``raw``, or the 400 a real endpoint answers it with (the first problem)."""
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return Refusal(error_bodies.bad_request(_NOT_JSON))
    if not isinstance(body, dict):
        return Refusal(error_bodies.bad_request("The request body must be a JSON object."))
    model = body.get("model")
    if not isinstance(model, str) or not model:
        return Refusal(error_bodies.bad_request("you must provide a model parameter", "model"))
    messages = body.get("messages")
    if messages is None:
        return Refusal(
            error_bodies.bad_request(
                "Missing required parameter: 'messages'.", "messages", "missing_required_parameter"
            )
        )
    if not isinstance(messages, list) or not messages:
        return Refusal(error_bodies.bad_request("[] is too short - 'messages'", "messages"))
    max_tokens = body.get("max_completion_tokens")
    mt_name = "max_completion_tokens"
    if max_tokens is None:
        max_tokens, mt_name = body.get("max_tokens"), "max_tokens"
    if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1):
        return Refusal(
            error_bodies.bad_request(
                f"Invalid '{mt_name}': integer below minimum value. Expected a value >= 1, "
                f"but got {max_tokens!r} instead.",
                mt_name,
                "integer_below_min_value",
            )
        )
    tools: ToolRequest | None = None
    if body.get("tools") is not None:
        parsed = parse_tools(body)
        if isinstance(parsed, tuple):
            return Refusal(error_bodies.bad_request(*parsed))
        tools = parsed
    problem = check_tool_messages(messages)
    if problem is not None:
        return Refusal(error_bodies.bad_request(*problem))
    tier = body.get("service_tier")
    if tier is not None and tier not in SERVICE_TIERS:
        return Refusal(
            error_bodies.bad_request(
                f"Invalid value: {tier!r}. Supported values are: 'auto', 'default', 'flex', 'scale', and 'priority'.",
                "service_tier",
                "invalid_value",
            )
        )
    stream = body.get("stream") is True
    opts = body.get("stream_options")
    include_usage = stream and isinstance(opts, dict) and opts.get("include_usage") is True
    served = tier if tier in ("flex", "priority") else "default"
    return ChatRequest(body, model, messages, max_tokens, tools, stream, include_usage, served)
