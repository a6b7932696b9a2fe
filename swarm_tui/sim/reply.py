"""The reply to one chat request, as the server sends it: a status, headers, a body or a stream plan.

The last stage of ``Simulator.chat`` writes an ``Answer`` as OpenAI does: a ``chat.completion``
(with ``usage``, cached and reasoning tokens included), or a ``StreamPlan`` the server turns into
SSE chunks (reasoning pieces, then content, then the tool calls' deltas, OpenAI's way).

Writing time
    With ``tokens_per_s`` the drawn latency is the time to the first token and the answer's
    tokens follow at that rate: a plain answer arrives when its last token is written, a
    stream's chunks are spaced over the writing time.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from swarm_tui.sim.answers import split_pieces
from swarm_tui.sim.tools import split_arguments

if TYPE_CHECKING:
    from swarm_tui.sim.answering import Answer
    from swarm_tui.sim.request import Call

__all__ = ["Reply", "StreamPlan", "answer_reply"]


@dataclass(slots=True)
class StreamPlan:
    pieces: list[str]
    finish_reason: str
    usage: dict[str, Any]
    include_usage: bool
    #: send this many deltas (reasoning, content and tool-call pieces), then stall (None: send everything)
    stall_after: int | None = None
    #: ``reasoning_content`` pieces, sent before the content
    reasoning: list[str] = field(default_factory=list)
    #: encoded ``tool_calls`` delta objects, sent after the content
    tool_deltas: list[str] = field(default_factory=list)
    #: the first delta says ``"content": null`` (a tool call without text)
    null_content: bool = False
    #: seconds between deltas while the answer is written (``tokens_per_s``; 0: at once)
    piece_delay_s: float = 0.0


@dataclass(slots=True)
class Reply:
    status: int
    headers: dict[str, str]
    #: JSON body: a chat.completion or an error; None for a stream
    body: dict[str, Any] | None = None
    #: seconds to wait before answering (before the first chunk of a stream)
    delay_s: float = 0.0
    #: the request hangs: wait ``delay_s`` (hang_s) and then answer 504
    hang: bool = False
    stream: StreamPlan | None = None
    #: "rate_limited", "quota", "scripted" ... for the counters
    category: str | None = None
    #: the last user message (stats key) and the body hash
    prompt: str = ""
    key: str = ""
    #: for chunks: completion id, created, model, the service tier that served it
    meta: tuple[str, int, str, str] = ("", 0, "", "default")
    #: how many tool calls the answer makes (0: a final answer)
    tool_calls: int = 0
    #: a judge's verdict: "pointwise" or "pairwise" (None: not a judge request)
    judge: str | None = None
    #: the verdict was written as prose (``judge_prose_first``)
    judge_prose: bool = False
    #: the quality (1-10) a task answer carries (None: not a task answer)
    quality: int | None = None


def answer_reply(
    call: Call, answer: Answer, *, cached: int, latency_s: float, tokens_per_s: float | None, stall: bool
) -> Reply:
    """The 200 carrying ``answer``: a stream plan (stalling a third of the way when ``stall``) or
    a chat.completion that arrives once its tokens are written."""
    request = call.request
    completion_tokens = answer.tokens + answer.reasoning_tokens
    usage = {
        "prompt_tokens": call.prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": call.prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": answer.reasoning_tokens,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }
    completion_id = "chatcmpl-sim" + call.request_id[7:]
    meta = (completion_id, int(time.time()), request.model, request.service_tier)
    writing_s = completion_tokens / tokens_per_s if tokens_per_s else 0.0
    reply = Reply(
        200,
        call.headers,
        None,
        latency_s,
        prompt=call.prompt,
        key=call.key,
        meta=meta,
        tool_calls=len(answer.tool_calls),
        judge=call.judged.kind if call.judged is not None else None,
        judge_prose=answer.judge_prose,
        quality=answer.quality,
    )
    if request.stream:
        reply.stream = _stream_plan(answer, usage, request.include_usage, stall, writing_s)
    else:
        reply.body = _completion(answer, usage, meta)
        reply.delay_s = latency_s + writing_s
    return reply


def _stream_plan(
    answer: Answer, usage: dict[str, Any], include_usage: bool, stall: bool, writing_s: float
) -> StreamPlan:
    content = answer.content
    if not answer.tool_step and answer.refusal is None:
        assert content is not None
        pieces = split_pieces(content)
    else:
        pieces = split_pieces(content) if content else []
    thinking = split_pieces(answer.reasoning) if answer.reasoning else []
    deltas = _tool_deltas(answer.tool_calls)
    if answer.refusal is not None:  # OpenAI streams a refusal as `refusal` deltas, the content null
        deltas = [_dumps({"refusal": piece}) for piece in split_pieces(answer.refusal)]
    total = len(thinking) + len(pieces) + len(deltas)
    return StreamPlan(
        pieces,
        answer.finish_reason,
        usage,
        include_usage,
        max(1, total // 3) if stall else None,
        thinking,
        deltas,
        content is None,
        writing_s / max(1, total),
    )


def _completion(answer: Answer, usage: dict[str, Any], meta: tuple[str, int, str, str]) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": answer.content,
        "refusal": answer.refusal,
        "annotations": [],
    }
    if answer.reasoning is not None:
        message["reasoning_content"] = answer.reasoning
    if answer.tool_calls:
        message["tool_calls"] = answer.tool_calls
    completion_id, created, model, service_tier = meta
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": answer.finish_reason,
            }
        ],
        "usage": usage,
        "service_tier": service_tier,
        "system_fingerprint": "fp_swarm_sim",
    }


def _tool_deltas(tool_calls: list[dict[str, Any]]) -> list[str]:
    """Encoded ``tool_calls`` deltas, OpenAI's way: per call a first chunk with its index, id,
    type, name and empty arguments, then chunks carrying pieces of the arguments."""
    out: list[str] = []
    for i, call in enumerate(tool_calls):
        fn = call["function"]
        head = {"index": i, "id": call["id"], "type": "function", "function": {"name": fn["name"], "arguments": ""}}
        out.append(_dumps({"tool_calls": [head]}))
        out.extend(
            _dumps({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
            for piece in split_arguments(fn["arguments"])
        )
    return out


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
