"""The tools a chat request offers, checked as OpenAI checks them: pure rules, no HTTP.

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

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from swarm_tui.sim.tokens import estimate_tokens

__all__ = ["ToolSpec", "ToolRequest", "Problem", "parse_tools", "check_tool_messages"]

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_CHOICES = ("none", "auto", "required")


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
        spec = _tool_spec(f"tools[{i}]", tool)
        if not isinstance(spec, ToolSpec):
            return spec
        specs.append(spec)
    choice = _tool_choice(body.get("tool_choice"), [s.name for s in specs])
    if len(choice) == 3:
        return choice
    parallel = body.get("parallel_tool_calls") is not False
    return ToolRequest(tuple(specs), choice[0], choice[1], parallel, estimate_tokens(_dumps(raw)))


def _tool_spec(where: str, tool: Any) -> ToolSpec | Problem:
    """One entry of ``tools``, or the 400 naming what is wrong with it."""
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
    return ToolSpec(name, params)


def _tool_choice(raw: Any, names: list[str]) -> tuple[str, str | None] | Problem:
    """``(choice, the forced function's name)`` of ``tool_choice``, or the 400 it gets."""
    if raw is None:
        return "auto", None
    if isinstance(raw, str) and raw in _CHOICES:
        return raw, None
    if (
        isinstance(raw, dict)
        and raw.get("type") == "function"
        and isinstance(raw.get("function"), dict)
        and isinstance(raw["function"].get("name"), str)
    ):
        forced = raw["function"]["name"]
        if forced not in names:
            return (
                f"Invalid value for 'tool_choice': tool_choice references '{forced}' but no such tool exists in "
                "'tools'.",
                "tool_choice",
                "invalid_value",
            )
        return "function", forced
    return (
        "Invalid value for 'tool_choice': expected 'none', 'auto', 'required' or "
        '{"type": "function", "function": {"name": ...}}.',
        "tool_choice",
        "invalid_value",
    )


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


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
