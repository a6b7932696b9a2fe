"""Answers that come back and cannot be used, as providers send them: a refusal, a filtered answer,
one cut at its token limit, and a JSON answer that breaks the schema its request asks for.

Drawn per request from its own draws (``draws.py``), at the rates of ``SimConfig``:
``refusal_rate`` (``message.refusal``, no content), ``content_filter_rate``
(``finish_reason: content_filter``), ``length_rate`` (cut short, ``finish_reason: length``) and,
for a request that asks for JSON, ``schema_break_rate`` (a wrong enum value, a missing required
field, or the JSON wrapped in prose). They are first answers' faults: a request that asks again
after an answer it was told was wrong (a re-ask: the conversation's last user turn follows an
assistant turn and speaks of an error) is answered well, as a model shown its error mostly is;
and a model named in ``strong_models`` (an escalation's target) always answers well.

A request with a ``json_schema`` response format is answered with an instance of its schema
(``schema_instance``), so that a client's validation has something true to check.
"""

from __future__ import annotations

import json
import re
from typing import Any

from swarm_tui.sim.config import SimConfig
from swarm_tui.sim.draws import Draws

__all__ = ["answer_fault", "asked_again", "schema_instance", "schema_of", "broken_instance", "REFUSAL_TEXT"]

REFUSAL_TEXT = "I'm sorry, but I can't help with that request."
BREAKS = ("wrong_enum", "missing_field", "prose")

_ERROR_WORDS = re.compile(r"\b(error|invalid|could not be used|failed|validation)\b", re.IGNORECASE)


def asked_again(messages: list[Any]) -> bool:
    """The request asks again after an answer it was told was wrong (a re-ask)."""
    if len(messages) < 3:
        return False
    last, before = messages[-1], messages[-2]
    if not (isinstance(last, dict) and isinstance(before, dict)):
        return False
    text = last.get("content")
    return (
        last.get("role") == "user"
        and before.get("role") == "assistant"
        and isinstance(text, str)
        and bool(_ERROR_WORDS.search(text))
    )


def answer_fault(config: SimConfig, body: dict[str, Any], messages: list[Any], draws: Draws) -> str | None:
    """The unusable answer this request gets (``refusal``, ``content_filter``, ``length``, or one of
    ``BREAKS`` for a JSON request), or None."""
    rates = (config.refusal_rate, config.content_filter_rate, config.length_rate, config.schema_break_rate)
    if not any(rates) or body.get("model") in config.strong_models or asked_again(messages):
        return None
    u, edge = draws.u_answer, 0.0
    for name, rate in zip(("refusal", "content_filter", "length"), rates, strict=False):
        edge += rate
        if u < edge:
            return name
    edge += config.schema_break_rate
    if u < edge and _wants_json(body):
        return BREAKS[min(len(BREAKS) - 1, int(draws.u_break * len(BREAKS)))]
    return None


def _wants_json(body: dict[str, Any]) -> bool:
    fmt = body.get("response_format")
    return isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema")


def schema_of(body: dict[str, Any]) -> Any:
    """The JSON Schema a request's ``json_schema`` response format names (None: none)."""
    fmt = body.get("response_format")
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
        return None
    inner = fmt.get("json_schema")
    return inner.get("schema") if isinstance(inner, dict) else None


def schema_instance(schema: Any, u: float, prompt: str, depth: int = 0) -> Any:
    """A value valid against ``schema`` (the common keywords: type, properties, required, enum,
    const, items, minItems, minimum/maximum, minLength), drawn from ``u``; strings name the prompt."""
    if not isinstance(schema, dict) or depth > 8:
        return None
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        options = schema["enum"]
        return options[int(u * len(options)) % len(options)]
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return schema_instance(schema[key][0], u, prompt, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), kind[0] if kind else None)
    if kind == "object" or (kind is None and "properties" in schema):
        properties = schema.get("properties") or {}
        return {name: schema_instance(sub, u, f"{prompt} {name}", depth + 1) for name, sub in properties.items()}
    if kind == "array":
        count = max(int(schema.get("minItems", 1)), 1)
        return [schema_instance(schema.get("items", {}), (u + i / 7) % 1, prompt, depth + 1) for i in range(count)]
    if kind == "integer":
        low = schema.get("minimum", 0)
        high = schema.get("maximum", low + 100)
        return int(low + int(u * (high - low + 1)) % max(1, high - low + 1))
    if kind == "number":
        low = schema.get("minimum", 0.0)
        high = schema.get("maximum", low + 1.0)
        return round(low + u * (high - low), 3)
    if kind == "boolean":
        return u >= 0.5
    if kind == "null":
        return None
    text = f"Sim answer to: {prompt[:120]}"
    least = int(schema.get("minLength", 0))
    return text + "." * max(0, least - len(text))


def broken_instance(value: Any, schema: Any, how: str) -> str:
    """``value`` (valid against ``schema``) broken as ``how`` says, as the answer's text: a wrong
    enum value, a required field missing (a wrong type where neither applies), or prose around it."""
    if how == "prose":
        return (
            "Here is the JSON you asked for:\n```json\n"
            + json.dumps(value, ensure_ascii=False)
            + "\n```\nHope it helps!"
        )
    if isinstance(value, dict) and isinstance(schema, dict):
        properties = schema.get("properties") or {}
        enums = [
            name for name, sub in properties.items() if isinstance(sub, dict) and isinstance(sub.get("enum"), list)
        ]
        required = [name for name in schema.get("required") or () if name in value]
        broken = dict(value)
        if how == "wrong_enum" and enums:
            broken[enums[0]] = "not-one-of-them"
        elif required:
            del broken[required[0]]
        elif broken:
            first = next(iter(broken))
            broken[first] = {"unexpected": [broken[first]]}
        else:
            return "not JSON at all"
        return json.dumps(broken, ensure_ascii=False)
    return json.dumps({"unexpected": value}, ensure_ascii=False)
