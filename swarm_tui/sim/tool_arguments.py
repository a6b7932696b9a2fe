"""Arguments for a tool call, made from the tool's JSON schema: seeded, pure, no HTTP.

Only the required properties are filled (``$ref``, ``anyOf``/``oneOf``, type lists, ``enum`` and
``const`` understood); a string is the task token (``t-3fa2b1c9``), followed by a topic such as
``retries`` when the property is a query (``term``, ``query``, ``text``, ...), so a test (and a
person reading a transcript) can tell which agent asked what; integers and numbers are small
ints within any ``minimum``/``maximum``; booleans seeded; arrays one item (or ``minItems``).
"""

from __future__ import annotations

import math
import random
from typing import Any

__all__ = ["schema_arguments"]

#: string properties that read as a query get a topic after the task token
_QUERY_NAMES = frozenset(
    {"term", "query", "q", "topic", "search", "keyword", "keywords", "question", "text", "subject", "prompt"}
)
_TOPICS = (
    "rate limits",
    "retries",
    "prefix caching",
    "failover",
    "backoff",
    "hedging",
    "timeouts",
    "streaming",
    "token bucket",
    "critical path",
)


def schema_arguments(schema: Any, rng: random.Random, token: str) -> dict[str, Any]:
    """A JSON object satisfying a tool's ``parameters`` schema (its required properties)."""
    value = _value(schema if isinstance(schema, dict) else {}, rng, token, schema, "", 0, top=True)
    return value if isinstance(value, dict) else {}


def _resolve(ref: str, root: Any) -> Any:
    if not ref.startswith("#/"):
        return {}
    node = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            return {}
        node = node[part]
    return node


def _bound(schema: dict[str, Any], key: str, exclusive: str, default: int | None, step: int) -> int | None:
    v = schema.get(key)
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        return math.ceil(v) if step > 0 else math.floor(v)
    v = schema.get(exclusive)
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        return math.floor(v) + 1 if step > 0 else math.ceil(v) - 1
    return default


def _value(schema: Any, rng: random.Random, token: str, root: Any, name: str, depth: int, top: bool = False) -> Any:
    if not isinstance(schema, dict):
        return token
    if depth > 8:
        return None
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return _value(_resolve(ref, root), rng, token, root, name, depth + 1, top)
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return rng.choice(enum)
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            usable = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")] or options
            return _value(usable[0], rng, token, root, name, depth + 1, top)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if top or "properties" in schema else "array" if "items" in schema else "string"
    if kind == "object":
        props = schema.get("properties")
        props = props if isinstance(props, dict) else {}
        required = schema.get("required")
        names = [r for r in required if isinstance(r, str)] if isinstance(required, list) else []
        return {n: _value(props.get(n, {"type": "string"}), rng, token, root, n, depth + 1) for n in names}
    if kind == "array":
        n_items = schema.get("minItems")
        n_items = n_items if isinstance(n_items, int) and not isinstance(n_items, bool) and n_items > 1 else 1
        items = schema.get("items", {"type": "string"})
        return [_value(items, rng, token, root, name, depth + 1) for _ in range(min(n_items, 8))]
    if kind in ("integer", "number"):
        hi = _bound(schema, "maximum", "exclusiveMaximum", None, -1)
        lo = _bound(schema, "minimum", "exclusiveMinimum", 1 if hi is None else min(1, hi), +1)
        assert lo is not None
        if hi is None:
            hi = lo + 8
        if hi < lo:
            return lo
        return rng.randint(lo, min(hi, lo + 8))
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    return _string(schema, rng, token, name)


def _string(schema: dict[str, Any], rng: random.Random, token: str, name: str) -> str:
    fmt = schema.get("format")
    if fmt == "date-time":
        text = "2025-01-01T00:00:00Z"
    elif fmt == "date":
        text = "2025-01-01"
    elif fmt in ("uri", "url"):
        text = f"https://example.com/{token}"
    elif fmt == "email":
        text = f"{token}@example.com"
    elif name.lower() in _QUERY_NAMES:
        text = f"{token} {rng.choice(_TOPICS)}"
    else:
        text = token
    low = schema.get("minLength")
    if isinstance(low, int) and len(text) < low:
        text = text + "x" * (low - len(text))
    high = schema.get("maxLength")
    if isinstance(high, int) and high >= 0 and len(text) > high:
        text = text[:high]
    return text
