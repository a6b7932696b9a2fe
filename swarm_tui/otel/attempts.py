"""An attempt's chat span attributes, by the GenAI conventions and under the project's namespace.

A pure function of the attempt (and the request's model, `max_tokens` and server, read when the
span was made): the live export calls it when the span's batch is sent, on the batch
processor's thread, so the run's loop does not build a dict of twenty attributes per call, and
a span dropped (its collector down) never has it built.
"""

from __future__ import annotations

from swarm_tui.core.events import Attempt
from swarm_tui.otel.facts import BATCH_SUFFIX
from swarm_tui.otel.spans import Attributes

NS = "swarm_tui."
"""The project's own attribute namespace (cost, lane, outcome...)."""


def chat_attributes(
    attempt: Attempt, model: str | None, max_tokens: int | None, server: tuple[str, int] | None
) -> Attributes:
    usage = attempt.usage
    attributes: Attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider_name(attempt.endpoint),
        "gen_ai.usage.input_tokens": usage.prompt,
        "gen_ai.usage.output_tokens": usage.completion,
        "gen_ai.usage.cache_read.input_tokens": usage.cached,
        "gen_ai.usage.reasoning.output_tokens": usage.reasoning,
        NS + "task.index": attempt.index,
        NS + "attempt": attempt.number,
        NS + "endpoint": attempt.endpoint,
        NS + "lane": "batch" if attempt.endpoint.endswith(BATCH_SUFFIX) else "live",
        NS + "outcome": attempt.outcome,
        NS + "latency_ms": attempt.latency_ms,
    }
    if model:
        attributes["gen_ai.request.model"] = model
    if max_tokens is not None:
        attributes["gen_ai.request.max_tokens"] = max_tokens
    if attempt.finish_reason:
        attributes["gen_ai.response.finish_reasons"] = (attempt.finish_reason,)
    if attempt.request_id:
        attributes["gen_ai.response.id"] = attempt.request_id
    if attempt.cost_usd is not None:
        attributes[NS + "cost_usd"] = attempt.cost_usd
    if attempt.estimated:
        attributes[NS + "estimated"] = True
    if attempt.ttft_ms is not None:
        attributes["gen_ai.response.time_to_first_chunk"] = attempt.ttft_ms / 1000.0
    if attempt.gap_ms is not None:  # the GenAI metric's measure, per call: its mean time between chunks
        attributes["gen_ai.response.time_per_output_chunk"] = attempt.gap_ms / 1000.0
    if attempt.tokens_per_s is not None:
        attributes[NS + "tokens_per_s"] = attempt.tokens_per_s
    if attempt.status is not None:
        attributes["http.response.status_code"] = attempt.status
    if server is not None:
        attributes["server.address"], attributes["server.port"] = server
    if attempt.error is not None:
        attributes["error.type"] = error_type(attempt)
    return attributes


def provider_name(endpoint: str) -> str:
    """The provider's name of an endpoint name (`openai`, `openai/fallback`, `openai/batch`)."""
    return endpoint.split("/", 1)[0] or "unknown"


def error_type(attempt: Attempt) -> str:
    error = attempt.error
    if error is None:
        return attempt.outcome
    return error.code or error.kind.value
