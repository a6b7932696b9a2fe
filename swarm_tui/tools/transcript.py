"""Where an agent stands, read from its transcript (the request's messages, as journaled).

An agent's state is its messages: each completed model call that asked for tools appended an
assistant message with `tool_calls`, and each tool call that finished appended a `tool`
message answering it. So the transcript alone says how many steps were taken and which tool
calls of the last step are still owed (after a crash, exactly those are run again).
"""

from __future__ import annotations

from typing import Any


def steps_taken(messages: list[dict[str, Any]]) -> int:
    """Model calls that asked for tools (the agent's completed steps so far)."""
    return sum(1 for m in messages if m.get("role") == "assistant" and m.get("tool_calls"))


def pending_tool_calls(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tool calls of the last step that no `tool` message answers yet."""
    return [call for _, call in owed_tool_calls(messages)]


def owed_tool_calls(messages: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """`pending_tool_calls`, each with its place among the step's calls (the same whichever of
    them were answered before a stop)."""
    for position in range(len(messages) - 1, -1, -1):
        message = messages[position]
        if message.get("role") == "assistant":
            calls = message.get("tool_calls") or []
            answered = {m.get("tool_call_id") for m in messages[position + 1 :] if m.get("role") == "tool"}
            return [(place, c) for place, c in enumerate(calls) if c.get("id") not in answered]
    return []


def assistant_message(answer: dict[str, Any]) -> dict[str, Any]:
    """The assistant message to append for a model answer that asked for tools: its text (if any)
    and its tool calls; the reasoning stays in the journal's attempt, not in the next request."""
    message: dict[str, Any] = {"role": "assistant", "content": answer.get("content"), "tool_calls": []}
    for call in answer.get("tool_calls") or []:
        function = call.get("function") or {}
        message["tool_calls"].append(
            {
                "id": call.get("id"),
                "type": "function",
                "function": {"name": function.get("name", ""), "arguments": function.get("arguments") or "{}"},
            }
        )
    return message


def tool_message(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}
