"""The simulated model as a tool-calling agent: pure rules, no HTTP, no clock.

A request that offers ``tools`` (OpenAI function tools) with ``tool_choice`` other than
"none" is one step of an agent's loop. The simulator counts the tool rounds already in the
conversation (assistant messages carrying ``tool_calls``); while fewer than N happened it
answers with ``finish_reason: "tool_calls"``, after that it answers normally and quotes the
tool results it got.

The task
    An agent is identified by its *first user message* (the task; later turns append
    assistant and tool messages, never change it). Its token ``task_token`` is
    ``t-`` + the first 8 hex digits of SHA-256 of that message's text, so a test can
    compute which agent asked. Every choice below is seeded with (config seed, that text),
    so the same task makes the same choices whatever the interleaving or the retries.

N, the tool rounds before the final answer
    ``[[sim:tools=N]]`` in a user message scripts it (the first user message carrying one;
    N=0 answers at once); else a seeded draw in ``SimConfig.tool_rounds`` (default 1..4).
    ``tool_choice: "required"`` or a named function forces a tool call on every answer, as
    it does on a real model (the client's ``max_steps`` has to end the loop);
    ``tool_choice: "none"`` answers at once.

A tool-calling step (``choose_calls``)
    1 call (60%), 2 (25%) or 3 (15%); 1 when ``parallel_tool_calls`` is false. Each picks a
    tool from those offered (only the named one when ``tool_choice`` names one), with
    arguments filled from its JSON schema (``schema_arguments``): the required properties
    (``$ref``, ``anyOf``/``oneOf``, type lists, ``enum`` and ``const`` understood); a string
    is the task token (``t-3fa2b1c9``), followed by a topic such as ``retries`` when the
    property is a query (``term``, ``query``, ``text``, ...); integers and numbers are
    small ints within any ``minimum``/``maximum``; booleans seeded; arrays one item.
    ``content`` is null or a short thought. Ids are ``call_`` + 20 hex digits (the
    simulator's random run id and the request's number), never reused. Completion tokens
    are the estimate of the content plus each call's name and arguments; above
    ``max_tokens`` the step is cut there (``finish_reason`` "length", the last call's
    arguments cut short, later calls dropped).

The final answer
    When the conversation holds ``tool`` messages, the answer (with or without tools
    offered) is ``Sim answer to: <last user message[:200]>``, a newline, the line
    ``tool results: R1 | R2 | ...`` (each tool message's text in order, whitespace folded
    to single spaces, cut to 80 characters then ``…``), a newline and filler words. A JSON
    answer carries them as ``"tool_results": [...]`` instead. ``max_tokens`` cuts this
    answer like any other, so give an agent room for its quote.

Latency, faults (scripted and random 5xx, 429, hangs, stalls) and rate limits apply to a
tool-calling answer exactly as to any other: the tool decision is made after them.

Reasoning
    ``[[sim:reasoning]]`` in a user message, or ``SimConfig.reasoning`` (``--reasoning``),
    adds a ``reasoning_content`` (Kimi / DeepSeek's field) before every answer's content:
    in the message of a plain answer, as ``delta.reasoning_content`` chunks in a stream.
    Its tokens count in ``completion_tokens`` and in ``completion_tokens_details.reasoning_tokens``.

Validation (400, OpenAI's wording): ``tools`` must be a non-empty array of
``{"type": "function", "function": {"name": ..., "parameters": {...}}}`` with names of
``[a-zA-Z0-9_-]{1,64}``; ``tool_choice`` "none" / "auto" / "required" or a named function
that is offered; a ``tool`` message must answer a ``tool_call_id`` of the assistant message
before it, and every call of an assistant message must be answered before the next
message. The tool definitions count in ``prompt_tokens`` (compact JSON, estimated).
A ``tool_choice`` without ``tools`` is ignored (OpenAI refuses it; a request without tools
is answered exactly as before tools existed).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .behaviour import content_text, estimate_tokens

__all__ = [
    "scripted_tokens",
    "ToolSpec",
    "ToolRequest",
    "parse_tools",
    "check_tool_messages",
    "first_user_text",
    "task_token",
    "directives",
    "rounds_done",
    "tool_results",
    "quote_results",
    "folded_results",
    "planned_rounds",
    "choose_calls",
    "schema_arguments",
    "thought",
    "reasoning_text",
    "fit_tool_answer",
    "split_arguments",
    "RESULT_WIDTH",
]

#: each quoted tool result is cut to this many characters
RESULT_WIDTH = 80

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_TOOLS_MARKER = re.compile(r"\[\[sim:tools=(\d+)\]\]", re.IGNORECASE)
_REASONING_MARKER = "[[sim:reasoning]]"
_TOKENS_MARKER = re.compile(r"\[\[sim:tokens=(\d+)\]\]", re.IGNORECASE)

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


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


# --------------------------------------------------------------------------------------
# the request


@dataclass(slots=True, frozen=True)
class ToolSpec:
    name: str
    parameters: dict[str, Any]


@dataclass(slots=True, frozen=True)
class ToolRequest:
    tools: tuple[ToolSpec, ...]
    #: "auto", "none", "required", or "function" (then ``forced`` names it)
    choice: str
    forced: str | None
    parallel: bool
    #: estimated tokens of the tool definitions (they are part of the prompt)
    tokens: int

    @property
    def calls_allowed(self) -> bool:
        return self.choice != "none"

    @property
    def must_call(self) -> bool:
        return self.choice in ("required", "function")


#: (message, param, code) of a 400
Problem = tuple[str, str | None, str | None]


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def parse_tools(body: dict[str, Any]) -> ToolRequest | Problem | None:
    """The request's tools (None when it offers none), or the 400 a real endpoint answers."""
    raw = body.get("tools")
    if raw is None:
        return None
    if not isinstance(raw, list):
        return (
            f"Invalid type for 'tools': expected an array of objects, but got {_type_name(raw)} instead.",
            "tools",
            "invalid_type",
        )
    if not raw:
        return (
            "Invalid 'tools': empty array. Expected an array with minimum length 1, but got an empty array instead.",
            "tools",
            "empty_array",
        )
    specs: list[ToolSpec] = []
    for i, tool in enumerate(raw):
        where = f"tools[{i}]"
        if not isinstance(tool, dict):
            return (
                f"Invalid type for '{where}': expected an object, but got {_type_name(tool)} instead.",
                where,
                "invalid_type",
            )
        if tool.get("type") != "function":
            return (
                f"Invalid value: {tool.get('type')!r}. Supported values are: 'function'.",
                f"{where}.type",
                "invalid_value",
            )
        fn = tool.get("function")
        if not isinstance(fn, dict):
            return (
                f"Missing required parameter: '{where}.function'.",
                f"{where}.function",
                "missing_required_parameter",
            )
        name = fn.get("name")
        if not isinstance(name, str):
            return (
                f"Missing required parameter: '{where}.function.name'.",
                f"{where}.function.name",
                "missing_required_parameter",
            )
        if not _NAME.match(name):
            return (
                f"Invalid '{where}.function.name': string does not match pattern. Expected a string that matches "
                "the pattern '^[a-zA-Z0-9_-]+$'.",
                f"{where}.function.name",
                "invalid_value",
            )
        params = fn.get("parameters", {})
        if params is None:
            params = {}
        if not isinstance(params, dict):
            return (
                f"Invalid type for '{where}.function.parameters': expected an object, but got "
                f"{_type_name(params)} instead.",
                f"{where}.function.parameters",
                "invalid_type",
            )
        specs.append(ToolSpec(name, params))
    names = [s.name for s in specs]
    choice_raw = body.get("tool_choice")
    forced: str | None = None
    if choice_raw is None:
        choice = "auto"
    elif isinstance(choice_raw, str) and choice_raw in ("none", "auto", "required"):
        choice = choice_raw
    elif (
        isinstance(choice_raw, dict)
        and choice_raw.get("type") == "function"
        and isinstance(choice_raw.get("function"), dict)
        and isinstance(choice_raw["function"].get("name"), str)
    ):
        forced = choice_raw["function"]["name"]
        if forced not in names:
            return (
                f"Invalid value for 'tool_choice': tool_choice references '{forced}' but no such tool exists in "
                "'tools'.",
                "tool_choice",
                "invalid_value",
            )
        choice = "function"
    else:
        return (
            "Invalid value for 'tool_choice': expected 'none', 'auto', 'required' or "
            '{"type": "function", "function": {"name": ...}}.',
            "tool_choice",
            "invalid_value",
        )
    parallel = body.get("parallel_tool_calls") is not False
    return ToolRequest(tuple(specs), choice, forced, parallel, estimate_tokens(_dumps(raw)))


def check_tool_messages(messages: Sequence[Any]) -> Problem | None:
    """The 400 for a conversation whose tool messages do not answer its tool calls."""
    pending: dict[str, None] = {}
    pending_at = -1
    seen_calls = False
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        if role == "tool":
            call_id = m.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                return (
                    "Missing parameter 'tool_call_id': messages with role 'tool' must have a 'tool_call_id'.",
                    f"messages.[{i}].tool_call_id",
                    None,
                )
            if not seen_calls:
                return (
                    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message "
                    "with 'tool_calls'.",
                    f"messages.[{i}].role",
                    None,
                )
            if call_id not in pending:
                return (
                    f"Invalid parameter: 'tool_call_id' of '{call_id}' not found in 'tool_calls' of previous message.",
                    f"messages.[{i}].tool_call_id",
                    None,
                )
            del pending[call_id]
            continue
        if pending:
            break
        seen_calls = False
        if role == "assistant":
            calls = m.get("tool_calls")
            if calls:
                if not isinstance(calls, list):
                    return ("Invalid type for 'tool_calls': expected an array.", f"messages.[{i}].tool_calls", None)
                for c in calls:
                    cid = c.get("id") if isinstance(c, dict) else None
                    if not isinstance(cid, str) or not cid:
                        return (
                            "Missing required parameter: 'tool_calls[].id'.",
                            f"messages.[{i}].tool_calls",
                            "missing_required_parameter",
                        )
                    pending[cid] = None
                seen_calls, pending_at = True, i
    if pending:
        return (
            "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
            f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(pending)}",
            f"messages.[{pending_at}].role",
            None,
        )
    return None


# --------------------------------------------------------------------------------------
# the conversation


def first_user_text(messages: Sequence[Any]) -> str:
    """The text of the first ``user`` message: the task ('' when there is none)."""
    for m in messages:
        if isinstance(m, dict) and m.get("role") == "user":
            return content_text(m.get("content"))
    return ""


def task_token(task: str) -> str:
    """``t-`` + 8 hex digits of SHA-256 of the task's text."""
    return "t-" + hashlib.sha256(task.encode("utf-8")).hexdigest()[:8]


def directives(messages: Sequence[Any]) -> tuple[int | None, bool]:
    """``(N of the first [[sim:tools=N]], whether [[sim:reasoning]] appears)`` in user messages."""
    rounds: int | None = None
    reasoning = False
    for m in messages:
        if not (isinstance(m, dict) and m.get("role") == "user"):
            continue
        text = content_text(m.get("content"))
        low = text.lower()
        if "[[sim:" not in low:
            continue
        if rounds is None:
            found = _TOOLS_MARKER.search(text)
            if found:
                rounds = int(found.group(1))
        if _REASONING_MARKER in low:
            reasoning = True
    return rounds, reasoning


def scripted_tokens(messages: Sequence[Any]) -> int | None:
    """N of the first ``[[sim:tokens=N]]`` in a user message: the answer is N tokens long (still cut
    at ``max_tokens``), so one job can mix short and long answers (with ``tokens_per_s``, long
    answers take long, as a model's do)."""
    for m in messages:
        if isinstance(m, dict) and m.get("role") == "user":
            text = content_text(m.get("content"))
            if "[[sim:" in text.lower() and (found := _TOKENS_MARKER.search(text)):
                return max(1, int(found.group(1)))
    return None


def rounds_done(messages: Sequence[Any]) -> int:
    """How many assistant messages carry ``tool_calls`` (tool rounds already taken)."""
    return sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant" and m.get("tool_calls"))


def tool_results(messages: Sequence[Any]) -> list[str]:
    """The text of every ``tool`` message, in order."""
    return [content_text(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") == "tool"]


def _fold(text: str, width: int = RESULT_WIDTH) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[:width] + "…"


def quote_results(results: Sequence[str]) -> str:
    """``tool results: R1 | R2 | ...``, each folded to one line and cut to 80 characters."""
    return "tool results: " + " | ".join(_fold(r) for r in results)


def folded_results(results: Sequence[str]) -> list[str]:
    return [_fold(r) for r in results]


# --------------------------------------------------------------------------------------
# seeded choices


def _rng(seed: int, task: str, *parts: object) -> random.Random:
    text = "\x00".join([str(seed), task, *map(str, parts)])
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def planned_rounds(seed: int, task: str, lo: int, hi: int) -> int:
    """The task's tool rounds when no marker scripts them: seeded, in ``lo..hi``."""
    return _rng(seed, task, "rounds").randint(lo, hi)


def choose_calls(
    seed: int, task: str, step: int, tools: Sequence[ToolSpec], *, parallel: bool = True, forced: str | None = None
) -> list[tuple[str, str]]:
    """The ``(name, arguments JSON)`` of the calls of tool round ``step`` (0-based)."""
    rng = _rng(seed, task, "step", step)
    u = rng.random()
    count = 1 if not parallel or u < 0.6 else 2 if u < 0.85 else 3
    candidates = [t for t in tools if t.name == forced] if forced else list(tools)
    token = task_token(task)
    calls = []
    for _ in range(count):
        spec = rng.choice(candidates)
        args = schema_arguments(spec.parameters, rng, token)
        calls.append((spec.name, _dumps(args)))
    return calls


def thought(seed: int, task: str, step: int, names: Sequence[str]) -> str | None:
    """A tool step's ``content``: null half the time, else a short thought."""
    rng = _rng(seed, task, "thought", step)
    if rng.random() < 0.5:
        return None
    return f"To answer {task_token(task)} I will call {', '.join(dict.fromkeys(names))}."


def reasoning_text(task: str, step: int, names: Sequence[str] | None, results: int) -> str:
    """The ``reasoning_content`` of an answer: what the step is about to do, and why."""
    head = f"Step {step + 1} of task {task_token(task)}: {' '.join(task.split())[:80]}."
    if names:
        return f"{head} I do not know enough yet; I should call {', '.join(names)} and read the results."
    if results:
        return f"{head} I have {results} tool result(s); that is enough to write the answer, quoting them."
    return f"{head} I can answer this directly."


# --------------------------------------------------------------------------------------
# arguments from a JSON schema


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


# --------------------------------------------------------------------------------------
# the tool-calling answer


def fit_tool_answer(
    content: str | None, calls: list[tuple[str, str]], max_tokens: int | None
) -> tuple[str | None, list[tuple[str, str]], int, str]:
    """``(content, calls, completion_tokens, finish_reason)`` of a tool step.

    Its completion tokens are the estimate of the content and every call's name and
    arguments together. Beyond ``max_tokens`` the answer is cut there, in order (content,
    then each call's name and arguments, the last one's arguments cut short and no longer
    valid JSON, later calls dropped) with ``finish_reason`` "length", as a real model's is.
    """
    text = (content or "") + "".join(n + a for n, a in calls)
    tokens = estimate_tokens(text)
    if max_tokens is None or tokens <= max_tokens:
        return content, calls, tokens, "tool_calls"
    room = max_tokens * 4

    def take(s: str) -> str:
        nonlocal room
        raw = s.encode("utf-8")[: max(room, 0)]
        room -= len(raw)
        return raw.decode("utf-8", "ignore")

    cut_content = take(content) if content else content
    kept: list[tuple[str, str]] = []
    for name, args in calls:
        if room < len(name.encode("utf-8")):
            break
        kept.append((take(name), take(args)))
    text = (cut_content or "") + "".join(n + a for n, a in kept)
    return cut_content, kept, estimate_tokens(text), "length"


def split_arguments(arguments: str, size: int = 8) -> list[str]:
    """Stream pieces of a call's arguments (they join back to it)."""
    return [arguments[i : i + size] for i in range(0, len(arguments), size)]
