"""What the chat-completions API would refuse in a request body, before any token is billed.

A Batch JSONL line's body and a TOML job's `[request]` table are checked here, so that a job
fails before it is sent (exit 2, naming each field) instead of failing on every task at the
provider, billed or not. A null means the provider's default, as in the API.
"""

from __future__ import annotations

import math
from typing import Any

from swarm_tui.jobs.answer_spec import response_format_problems

__all__ = ["VALID_ROLES", "PARAM_CHECKS", "body_problems", "param_problems", "shown"]

VALID_ROLES = {"system", "developer", "user", "assistant", "tool", "function"}


def body_problems(body: dict[str, Any], *, model_required: bool) -> list[tuple[str, str]]:
    """(field, message) for each part of a chat-completions body the API would refuse."""
    found: list[tuple[str, str]] = []
    model = body.get("model")
    if model is None:
        if model_required:
            found.append(("model", "missing (name it in the body, or pass --model)"))
    elif not isinstance(model, str) or not model:
        found.append(("model", "must be a non-empty string"))
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        found.append(("messages", "missing or empty list"))
    else:
        for i, message in enumerate(messages):
            if not _plain_message(message):
                found.extend(_message_problems(f"messages[{i}]", message))
    found.extend(param_problems(body))
    return found


_PLAIN_ROLES = VALID_ROLES - {"tool"}


def _plain_message(message: Any) -> bool:
    """`{"role": ..., "content": "..."}` with a known role (not "tool", which needs its call's id):
    the shape of nearly every message, valid without the detailed checks of `_message_problems`."""
    return (
        type(message) is dict
        and len(message) == 2
        and type(message.get("content")) is str
        and type(role := message.get("role")) is str
        and role in _PLAIN_ROLES
    )


def _message_problems(where: str, message: Any) -> list[tuple[str, str]]:
    """What the chat-completions API would refuse in one message before any token is billed."""
    if not isinstance(message, dict):
        return [(where, "expected an object")]
    found: list[tuple[str, str]] = []
    role = message.get("role")
    if not isinstance(role, str) or role not in VALID_ROLES:  # a list or object as role is no crash
        found.append((f"{where}.role", f"unknown role {shown(role)}"))
    tool_calls = message.get("tool_calls")
    if tool_calls is not None and not isinstance(tool_calls, list):
        found.append((f"{where}.tool_calls", f"must be a list, not {shown(tool_calls)}"))
    content = message.get("content")
    if content is None:
        if not (role == "assistant" and (tool_calls or message.get("function_call"))):
            found.append(
                (
                    f"{where}.content",
                    "missing"
                    if "content" not in message
                    else "may be null only in an assistant message with tool_calls",
                )
            )
    elif isinstance(content, list):
        for j, part in enumerate(content):
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                found.append(
                    (f"{where}.content[{j}]", f"must be a content part object with a string type, not {shown(part)}")
                )
            elif part["type"] == "text" and not isinstance(part.get("text"), str):
                found.append((f"{where}.content[{j}].text", f"must be a string, not {shown(part.get('text'))}"))
    elif not isinstance(content, str):
        found.append((f"{where}.content", f"must be a string or a list of content parts, not {shown(content)}"))
    name = message.get("name")
    if name is not None and not isinstance(name, str):
        found.append((f"{where}.name", f"must be a string, not {shown(name)}"))
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        found.append((f"{where}.tool_call_id", "a tool message needs the string id of the call it answers"))
    return found


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return _is_int(value)


def _int_at_least(low: int) -> tuple[Any, str]:
    return (lambda v: _is_int(v) and v >= low), ("a positive integer" if low == 1 else f"an integer >= {low}")


def _int_between(low: int, high: int) -> tuple[Any, str]:
    return (lambda v: _is_int(v) and low <= v <= high), f"an integer from {low} to {high}"


def _number_between(low: float, high: float) -> tuple[Any, str]:
    return (lambda v: _is_number(v) and low <= v <= high), f"a number from {low:g} to {high:g}"


def _of_type(kind: type | tuple[type, ...], what: str) -> tuple[Any, str]:
    return (lambda v: isinstance(v, kind)), what


PARAM_CHECKS: dict[str, tuple[Any, str]] = {
    "max_tokens": _int_at_least(1),
    "max_completion_tokens": _int_at_least(1),
    "n": _int_at_least(1),
    "temperature": _number_between(0, 2),
    "top_p": _number_between(0, 1),
    "presence_penalty": _number_between(-2, 2),
    "frequency_penalty": _number_between(-2, 2),
    "seed": (_is_int, "an integer"),
    "stop": (
        (lambda v: isinstance(v, str) or (isinstance(v, list) and all(isinstance(s, str) for s in v))),
        "a string or a list of strings",
    ),
    "logprobs": _of_type(bool, "true or false"),
    "top_logprobs": _int_between(0, 20),
    "logit_bias": (
        (lambda v: isinstance(v, dict) and all(_is_number(b) for b in v.values())),
        "an object of token ids to numbers",
    ),
    "response_format": (
        (lambda v: isinstance(v, dict) and isinstance(v.get("type"), str)),
        "an object with a string type (text, json_object or json_schema)",
    ),
    "reasoning_effort": _of_type(str, "a string"),
    "user": _of_type(str, "a string"),
    "service_tier": _of_type(str, "a string"),
    "tools": ((lambda v: isinstance(v, list) and all(isinstance(t, dict) for t in v)), "a list of tool objects"),
    "tool_choice": _of_type((str, dict), "a string or an object"),
    "parallel_tool_calls": _of_type(bool, "true or false"),
    "store": _of_type(bool, "true or false"),
    "metadata": _of_type(dict, "an object"),
    "extra_body": _of_type(dict, "an object"),
}
"""Request parameters whose type the chat-completions API checks before any token is billed:
(is the value acceptable, what it must be). A null means the provider's default, as in the API."""


def param_problems(params: dict[str, Any]) -> list[tuple[str, str]]:
    """(key, message) for each request parameter of the wrong type (`PARAM_CHECKS`); streaming is
    the run's choice (`--stream`), not the job's."""
    found: list[tuple[str, str]] = []
    for key, value in params.items():
        if key in ("stream", "stream_options"):
            if key == "stream_options" or value is not False:
                found.append((key, "set streaming with --stream, not in the job"))
            continue
        check = PARAM_CHECKS.get(key)
        if check is not None and value is not None and not check[0](value):
            found.append((key, f"must be {check[1]}, not {shown(value)}"))
        elif key == "response_format":
            found.extend(response_format_problems(value))
    return found


def shown(value: Any, limit: int = 60) -> str:
    """A value in a message: its repr, cut short (a problem line stays one readable line)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
