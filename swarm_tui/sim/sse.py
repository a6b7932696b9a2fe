"""Server-sent ``chat.completion.chunk`` events, rendered from templates.

A stream has one event per word, so encoding each chunk with ``json.dumps`` of the whole
object would dominate the server's CPU; instead the invariant part of a chunk is encoded
once per stream and only the delta is encoded per piece. The sequence is OpenAI's: a role
delta with empty content (null for a tool call without text), ``reasoning_content`` deltas
when the answer reasons, content deltas, ``tool_calls`` deltas (a call's first chunk
carries its index, id, type, name and empty arguments, later ones pieces of its arguments),
a delta with ``finish_reason``, then (with
``stream_options.include_usage``) a chunk with empty ``choices`` and the usage, then
``data: [DONE]``. With include_usage every other chunk carries ``"usage": null``.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["ChunkWriter", "DONE"]

DONE = b"data: [DONE]\n\n"
_MARK = "\x00DELTA\x00"


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


class ChunkWriter:
    """Encodes the events of one stream (``meta`` = completion id, created, model, service tier)."""

    __slots__ = ("_base", "_pre", "_post_open", "_post_finish_head")

    def __init__(self, meta: tuple[str, int, str, str], include_usage: bool) -> None:
        cid, created, model, service_tier = meta
        base: dict[str, Any] = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "service_tier": service_tier,
            "system_fingerprint": "fp_swarm_sim",
            "choices": [{"index": 0, "delta": _MARK, "logprobs": None, "finish_reason": _MARK}],
        }
        if include_usage:
            base["usage"] = None
        self._base = base
        text = _dumps(base)
        q = _dumps(_MARK)
        pre, mid, post = text.split(q)
        # "data: {...,"delta":" + DELTA + ',"logprobs":null,"finish_reason":' + FINISH + "...}"
        self._pre = "data: " + pre
        self._post_open = mid
        self._post_finish_head = post + "\n\n"

    def _event(self, delta: str, finish: str) -> str:
        return self._pre + delta + self._post_open + finish + self._post_finish_head

    def head(self) -> str:
        return self._event('{"role":"assistant","content":"","refusal":null}', "null")

    def head_null(self) -> str:
        """The first delta of an answer without content (a tool call), as OpenAI sends it."""
        return self._event('{"role":"assistant","content":null,"refusal":null}', "null")

    def piece(self, text: str) -> str:
        return self._event('{"content":' + _dumps(text) + "}", "null")

    def reasoning(self, text: str) -> str:
        """A ``reasoning_content`` delta (Kimi / DeepSeek), sent before the content."""
        return self._event('{"reasoning_content":' + _dumps(text) + "}", "null")

    def delta(self, encoded: str) -> str:
        """An event carrying an already encoded delta object (a tool call's pieces)."""
        return self._event(encoded, "null")

    def finish(self, reason: str) -> str:
        return self._event("{}", _dumps(reason))

    def usage(self, usage: dict[str, Any]) -> str:
        chunk = dict(self._base)
        chunk["choices"] = []
        chunk["usage"] = usage
        return "data: " + _dumps(chunk) + "\n\n"
