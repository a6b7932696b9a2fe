"""L4 aggregator: reduce the workers' answers to one.

When the answers together exceed the aggregator's budget (`chunk_tokens`), they are reduced in
chunks first (map-reduce, as many levels as needed), so the final call never passes the
context length. A JSON aggregate is read robustly and asked for once more when unreadable;
the raw text is kept either way.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from swarm_tui.jobs.swarm_spec import SwarmSpec
from swarm_tui.swarm.memory import estimate_tokens
from swarm_tui.util.json_repair import JsonExtractionError, extract_json

MAP_PROMPT = (
    "Summarise these workers' answers into one shorter text for the goal below. Keep every distinct "
    "finding and every disagreement; drop repetition."
)


def aggregate_index(round_number: int) -> int:
    """Journal index of a round's aggregator calls (negative: not a task of the grid)."""
    return -100 - round_number


@dataclass(frozen=True)
class Aggregate:
    text: str
    parsed: Any | None
    sources: list[str]
    levels: int
    """How many map-reduce levels ran before the final call (0: the answers fitted at once)."""
    parse_error: str | None = None


def chunk(items: list[str], budget_tokens: int) -> list[list[str]]:
    """Consecutive groups of items, each within the budget (an item larger than it stands alone)."""
    groups: list[list[str]] = [[]]
    used = 0
    for item in items:
        size = estimate_tokens(item)
        if groups[-1] and used + size > budget_tokens:
            groups.append([])
            used = 0
        groups[-1].append(item)
        used += size
    return groups


async def aggregate(
    engine, spec: SwarmSpec, model: str, outputs: list[tuple[str, str]], round_number: int, context: str = ""
) -> Aggregate:
    assert spec.aggregate is not None
    settings = spec.aggregate
    index = aggregate_index(round_number)
    items = [f"[{custom_id}] {text.strip()}" for custom_id, text in outputs]
    levels = 0
    while len(items) > 1 and sum(estimate_tokens(i) for i in items) > settings.chunk_tokens:
        groups = chunk(items, settings.chunk_tokens)
        if len(groups) == len(items) and levels > 0:
            break  # nothing shrinks any more: let the final call take what there is
        levels += 1
        engine.announce_phase("aggregating", f"map-reduce level {levels}: {len(items)} answers in {len(groups)} chunks")
        results = await asyncio.gather(
            *[
                engine.call_direct(
                    "aggregate",
                    index,
                    _body(model, spec.goal, MAP_PROMPT, group, settings.max_tokens, json_mode=False, context=context),
                )
                for group in groups
            ]
        )
        items = [f"[summary {n + 1} of level {levels}] {r.content.strip()}" for n, r in enumerate(results)]
    engine.announce_phase("aggregating", "final reduce")
    body = _body(
        model, spec.goal, settings.prompt, items, settings.max_tokens, json_mode=settings.json, context=context
    )
    result = await engine.call_direct("aggregate", index, body)
    sources = [custom_id for custom_id, _ in outputs]
    if not settings.json:
        return Aggregate(result.content, None, sources, levels)
    try:
        return Aggregate(result.content, extract_json(result.content), sources, levels)
    except JsonExtractionError as exc:
        retry = {
            **body,
            "messages": [
                *body["messages"],
                {"role": "assistant", "content": result.content},
                {
                    "role": "user",
                    "content": f"That answer could not be read: {exc}. Answer again with valid JSON only.",
                },
            ],
        }
    again = await engine.call_direct("aggregate", index, retry)
    try:
        return Aggregate(again.content, extract_json(again.content), sources, levels)
    except JsonExtractionError as exc:
        return Aggregate(again.content, None, sources, levels, parse_error=str(exc))


def _body(
    model: str, goal: str, instruction: str, items: list[str], max_tokens: int, *, json_mode: bool, context: str
) -> dict[str, Any]:
    messages = []
    if context:
        messages.append({"role": "system", "content": context})
    messages.append({"role": "system", "content": instruction + (" Answer with JSON only." if json_mode else "")})
    messages.append({"role": "user", "content": f"Goal: {goal}\n\nWorkers' answers:\n\n" + "\n\n".join(items)})
    body: dict[str, Any] = {"model": model, "messages": messages, "max_tokens": max_tokens}
    if json_mode:
        body["response_format"] = {"type": "json_object"}
    return body
