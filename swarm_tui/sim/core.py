"""The simulator's state and its per-request decision, independent of HTTP.

``Simulator.chat`` turns one chat-completions request (raw body bytes and the
Authorization header) into a ``Reply``: a status, headers, a JSON body or a stream plan,
and how long to wait before answering. The server (``server.py``) only performs the waits
and writes; it reports back what it actually sent with ``Simulator.finish`` so the
counters in ``stats()`` describe responses that really went out (a hung request that the
client abandoned is counted as a hang, not as a 504).

All state lives in one event loop (the server's), so nothing here locks.

Checks, in order: endpoint down (503) → API key (401) → body validation (400, tools and
tool messages included) → context length (400) → scripted marker → rate limits (429) →
random faults (5xx / hang) → answer: tool calls while an agent has tool rounds left (see
``tools.py``), else a judge's verdict for a judge request, else the text or JSON answer, quoting
any tool results and carrying its quality mark (``judging.py``). A judge request ignores
scripted markers quoted in what it judges.
Rate-limit refusals and validation errors are answered at once; everything admitted waits
its drawn latency first.

The Batch API (``batches.py``, held in ``Simulator.batches``) answers each batch line with
``chat_offline``: the same ``chat`` decision (answers, usage, cached tokens, markers, seeding,
faults), but outside the live rate limits and counted in ``stats()["batch"]["chat"]``, never
in the live ``requests``/``successes``/... counters.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass, field
from typing import Any

from . import errors
from .batches import BatchStore
from .behaviour import (
    Occurrences,
    PrefixCache,
    RateLimiter,
    build_answer,
    build_json_answer,
    draw,
    estimate_tokens,
    find_marker,
    last_user_text,
    marker_message,
    openai_duration,
    planned_subtasks,
    prompt_tokens,
    request_key,
    split_pieces,
    wants_json,
)
from .config import SimConfig
from .judging import (
    answer_quality,
    drift_line,
    judge_content,
    judge_request,
    memory_rounds,
    quality_mark,
)
from .tools import (
    ToolRequest,
    check_tool_messages,
    choose_calls,
    directives,
    first_user_text,
    fit_tool_answer,
    folded_results,
    parse_tools,
    planned_rounds,
    quote_results,
    reasoning_text,
    rounds_done,
    scripted_tokens,
    split_arguments,
    thought,
    tool_results,
)

__all__ = ["Simulator", "Reply", "StreamPlan"]

#: what a scripted ``[[sim:429]]`` asks the client to wait
_SCRIPTED_429_WAIT_S = 0.1

#: the limiter batch lines see: the live RPM/TPM buckets do not apply to the Batch API
_UNLIMITED = RateLimiter(None, None)


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
    #: for chunks: completion id, created, model
    meta: tuple[str, int, str] = ("", 0, "")
    #: how many tool calls the answer makes (0: a final answer)
    tool_calls: int = 0
    #: a judge's verdict: "pointwise" or "pairwise" (None: not a judge request)
    judge: str | None = None
    #: the verdict was written as prose (``judge_prose_first``)
    judge_prose: bool = False
    #: the quality (1-10) a task answer carries (None: not a task answer)
    quality: int | None = None


@dataclass
class _Stats:
    requests: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    successes: int = 0
    rate_limited: int = 0
    quota_errors: int = 0
    server_errors: int = 0
    client_errors: int = 0
    hangs: int = 0
    stream_stalls: int = 0
    streams: int = 0
    scripted: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    duplicate_successes: int = 0
    successes_by_prompt: dict[str, int] = field(default_factory=dict)
    succeeded_keys: set[str] = field(default_factory=set)
    tool_steps: int = 0
    tool_calls: int = 0
    judge_requests: int = 0
    judge_pointwise: int = 0
    judge_pairwise: int = 0
    judge_prose: int = 0
    quality_answers: int = 0
    quality_sum: int = 0


class Simulator:
    """One simulated endpoint: config, rate-limit buckets, prefix cache, memory, counters."""

    def __init__(self, config: SimConfig | None = None, clock=time.monotonic) -> None:
        self._clock = clock
        self.config = config or SimConfig()
        self._run = os.urandom(4).hex()
        self._seq = 0
        self.in_flight = 0
        self._started = time.time()
        self._reset_memory()

    # -- admin --------------------------------------------------------------------------

    def _reset_memory(self) -> None:
        cfg = self.config
        self.limiter = RateLimiter(cfg.rpm, cfg.tpm, cfg.burst_s, self._clock)
        self.cache = PrefixCache(cfg.cache_min_tokens)
        self.seen = Occurrences()
        self.marker_seen = Occurrences()
        self.stats_ = _Stats()
        #: the most chat requests the server held at once (how much concurrency a client used)
        self.peak_in_flight = 0
        #: counters of the Batch API lines' ``chat`` calls (``chat_offline``), apart from the live ones
        self.batch_stats_ = _Stats()
        self.batches = BatchStore(self, self._clock, self._run)
        #: judge verdicts still to be written as prose (``judge_prose_first``)
        self.judge_prose_left = cfg.judge_prose_first

    def reset(self) -> None:
        """Zero the counters and forget bodies seen, cached prefixes and bucket levels, and the
        Batch API's files and batches."""
        self._reset_memory()

    def update_config(self, patch: dict[str, Any]) -> SimConfig:
        """Apply a JSON patch of ``SimConfig`` fields (ValueError when invalid)."""
        old = self.config
        new = old.patched(patch)
        self.config = new
        if (new.rpm, new.tpm, new.burst_s) != (old.rpm, old.tpm, old.burst_s):
            self.limiter = RateLimiter(new.rpm, new.tpm, new.burst_s, self._clock)
        self.cache.min_tokens = new.cache_min_tokens
        if "judge_prose_first" in patch:
            self.judge_prose_left = new.judge_prose_first
        return new

    def stats(self) -> dict[str, Any]:
        """The live chat counters, ``in_flight``, ``uptime_s``, ``config``, and ``batch``: the
        Batch API's counters (``BatchStore.stats``) with ``batch["chat"]``, the same chat
        counters as the top level's but of the batch lines only (never counted at the top)."""
        return {
            **_counters(self.stats_),
            "in_flight": self.in_flight,
            "peak_in_flight": self.peak_in_flight,
            "uptime_s": round(time.time() - self._started, 3),
            "batch": {**self.batches.stats(), "chat": _counters(self.batch_stats_)},
            "config": self.config.to_dict(),
        }

    def entered(self) -> None:
        """A chat request is being answered (until `left`)."""
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

    def left(self) -> None:
        self.in_flight -= 1

    def chat_offline(self, raw: bytes, authorization: str | None) -> Reply:
        """``chat`` for one Batch API line, counted at once (nothing is sent, nothing waits).

        The decision is ``chat``'s own (validation, markers, faults, answers, shared prefix cache
        and occurrence counts), but the live rate limits do not apply and the line is counted in
        ``batch_stats_``, not in the live counters. A hang is answered as its 504."""
        live_stats, live_limiter = self.stats_, self.limiter
        self.stats_, self.limiter = self.batch_stats_, _UNLIMITED
        try:
            reply = self.chat(raw, authorization)
            self.finish(reply)
        finally:
            self.stats_, self.limiter = live_stats, live_limiter
        return reply

    # -- bookkeeping the server reports back ------------------------------------------------

    def finish(self, reply: Reply, status: int | None = None) -> None:
        """Count a response that was actually sent (``status`` overrides reply.status)."""
        s = self.stats_
        st = reply.status if status is None else status
        k = str(st)
        s.by_status[k] = s.by_status.get(k, 0) + 1
        if st == 200:
            s.successes += 1
            usage = reply.stream.usage if reply.stream is not None else reply.body["usage"]  # type: ignore[index]
            s.prompt_tokens += usage["prompt_tokens"]
            s.completion_tokens += usage["completion_tokens"]
            cached = usage["prompt_tokens_details"]["cached_tokens"]
            s.cached_tokens += cached
            if cached:
                s.cache_hits += 1
            s.successes_by_prompt[reply.prompt] = s.successes_by_prompt.get(reply.prompt, 0) + 1
            if reply.tool_calls:
                s.tool_steps += 1
                s.tool_calls += reply.tool_calls
            if reply.judge == "pointwise":
                s.judge_pointwise += 1
            elif reply.judge == "pairwise":
                s.judge_pairwise += 1
            if reply.judge_prose:
                s.judge_prose += 1
            if reply.quality is not None:
                s.quality_answers += 1
                s.quality_sum += reply.quality
            if reply.key in s.succeeded_keys:
                s.duplicate_successes += 1
            else:
                s.succeeded_keys.add(reply.key)
        elif st >= 500:
            s.server_errors += 1
        elif reply.category == "rate_limited":
            s.rate_limited += 1
        elif reply.category == "quota":
            s.quota_errors += 1
        else:
            s.client_errors += 1

    def hung(self) -> None:
        self.stats_.hangs += 1

    def stalled(self) -> None:
        self.stats_.stream_stalls += 1

    # -- the decision ---------------------------------------------------------------------

    def _error(
        self,
        status_body: tuple[int, dict],
        headers: dict[str, str],
        category: str | None = None,
        delay_s: float = 0.0,
        prompt: str = "",
        key: str = "",
    ) -> Reply:
        status, body = status_body
        if self.limiter.active and self.config.rate_headers:
            headers = {**self.limiter.headers(), **headers}
        return Reply(status, headers, body, delay_s, category=category, prompt=prompt, key=key)

    def chat(self, raw: bytes, authorization: str | None) -> Reply:
        """Decide the answer to one ``POST /v1/chat/completions``."""
        cfg = self.config
        self.stats_.requests += 1
        self._seq += 1
        request_id = f"req_sim{self._run}{self._seq:010x}"
        headers = {"x-request-id": request_id}

        if cfg.down:
            return self._error(errors.server_error(503), headers)
        if cfg.require_key is not None:
            if not authorization:
                return self._error(errors.invalid_api_key(True), headers)
            if authorization != "Bearer " + cfg.require_key:
                return self._error(errors.invalid_api_key(False), headers)

        # -- validation
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            return self._error(
                errors.bad_request(
                    "We could not parse the JSON body of your request. (HINT: This likely means "
                    "you aren't using your HTTP library correctly. The OpenAI API expects a JSON "
                    "payload, but what was sent was not valid JSON."
                ),
                headers,
            )
        if not isinstance(body, dict):
            return self._error(errors.bad_request("The request body must be a JSON object."), headers)
        model = body.get("model")
        if not isinstance(model, str) or not model:
            return self._error(errors.bad_request("you must provide a model parameter", "model"), headers)
        messages = body.get("messages")
        if messages is None:
            return self._error(
                errors.bad_request("Missing required parameter: 'messages'.", "messages", "missing_required_parameter"),
                headers,
            )
        if not isinstance(messages, list) or not messages:
            return self._error(errors.bad_request("[] is too short - 'messages'", "messages"), headers)
        max_tokens = body.get("max_completion_tokens")
        mt_name = "max_completion_tokens"
        if max_tokens is None:
            max_tokens, mt_name = body.get("max_tokens"), "max_tokens"
        if max_tokens is not None and (
            not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1
        ):
            return self._error(
                errors.bad_request(
                    f"Invalid '{mt_name}': integer below minimum value. Expected a value >= 1, "
                    f"but got {max_tokens!r} instead.",
                    mt_name,
                    "integer_below_min_value",
                ),
                headers,
            )
        tool_req: ToolRequest | None = None
        if body.get("tools") is not None:
            parsed = parse_tools(body)
            if isinstance(parsed, tuple):
                return self._error(errors.bad_request(*parsed), headers)
            tool_req = parsed
        problem = check_tool_messages(messages)
        if problem is not None:
            return self._error(errors.bad_request(*problem), headers)
        stream = body.get("stream") is True
        opts = body.get("stream_options")
        include_usage = stream and isinstance(opts, dict) and opts.get("include_usage") is True

        judged = judge_request(messages)
        if judged is not None:
            self.stats_.judge_requests += 1
        key = request_key(body)
        n = self.seen.next(key)
        prompt = last_user_text(messages)
        p_tokens = prompt_tokens(messages)
        if tool_req is not None:
            p_tokens += tool_req.tokens

        if p_tokens + (max_tokens or 0) > cfg.context_window:
            return self._error(
                errors.context_length_exceeded(cfg.context_window, p_tokens, max_tokens or 0),
                headers,
                prompt=prompt,
                key=key,
            )

        # -- scripted faults (a judge request quotes a task and answers: their markers are not its own)
        marker_text = marker_message(messages) if judged is None else ""
        marker = find_marker(marker_text) if marker_text else None
        hang = stall = broken_json = prose = False
        if marker is not None and marker.applies(self.marker_seen.next(marker_text)):
            self.stats_.scripted += 1
            code = marker.code
            if code == "badjson":
                broken_json = True
            elif code == "prose":
                prose = True
            elif code == "hang" or (code == "stall" and not stream):
                hang = True
            elif code == "stall":
                stall = True
            elif code == "quota":
                return self._error(errors.insufficient_quota(), headers, "quota", prompt=prompt, key=key)
            elif code == "429":
                w = _SCRIPTED_429_WAIT_S
                h = dict(headers)
                h["retry-after"] = str(max(1, math.ceil(w)))
                h["retry-after-ms"] = str(max(1, math.ceil(w * 1000)))
                return self._error(
                    errors.rate_limited("requests", model, cfg.rpm or 60, cfg.rpm or 60, 1, openai_duration(w)),
                    h,
                    "rate_limited",
                    prompt=prompt,
                    key=key,
                )
            else:
                return self._error(
                    errors.for_status(int(code), model, cfg.context_window, p_tokens, max_tokens or 0),
                    headers,
                    "scripted",
                    prompt=prompt,
                    key=key,
                )

        # -- rate limits
        cost = p_tokens + (max_tokens if max_tokens is not None else cfg.output_tokens[1])
        if self.limiter.active:
            adm = self.limiter.admit(cost)
            if not adm.ok:
                h = dict(headers)
                if adm.too_large:
                    return self._error(
                        errors.request_too_large(model, adm.limit, cost), h, "rate_limited", prompt=prompt, key=key
                    )
                h["retry-after"] = str(max(1, math.ceil(adm.wait_s)))
                h["retry-after-ms"] = str(max(1, math.ceil(adm.wait_s * 1000)))
                requested = 1 if adm.kind == "requests" else cost
                return self._error(
                    errors.rate_limited(
                        adm.kind or "requests", model, adm.limit, adm.used, requested, openai_duration(adm.wait_s)
                    ),
                    h,
                    "rate_limited",
                    prompt=prompt,
                    key=key,
                )
            if cfg.rate_headers:
                headers.update(self.limiter.headers())

        # -- random faults
        d = draw(cfg.seed, key, n)
        latency = d.latency_s(cfg.latency_ms, cfg.latency_sigma)
        cached = self.cache.observe(messages)
        if not (hang or stall):
            if d.u_fault < cfg.error_rate:
                return self._error(
                    errors.server_error(d.server_error_status()), headers, delay_s=latency, prompt=prompt, key=key
                )
            if d.u_fault < cfg.error_rate + cfg.hang_rate:
                hang = True
            elif stream and d.u_stall < cfg.stream_stall_rate:
                stall = True
        if hang:
            return Reply(504, headers, errors.server_error(504)[1], cfg.hang_s, hang=True, prompt=prompt, key=key)

        # -- the answer: a tool step while the agent has tool rounds left, else the final answer
        scripted_rounds, reasoning_marked = directives(messages)
        reasoning_on = cfg.reasoning or reasoning_marked
        results = tool_results(messages)
        task = first_user_text(messages) if tool_req is not None or reasoning_on else ""
        step = rounds_done(messages) if tool_req is not None or reasoning_on else 0
        calls: list[tuple[str, str]] | None = None
        if tool_req is not None and tool_req.calls_allowed:
            if tool_req.must_call:
                want = True
            else:
                rounds = scripted_rounds
                if rounds is None:
                    rounds = planned_rounds(cfg.seed, task, *cfg.tool_rounds)
                want = step < rounds
            if want:
                calls = choose_calls(
                    cfg.seed, task, step, tool_req.tools, parallel=tool_req.parallel, forced=tool_req.forced
                )
        content: str | None
        tool_calls: list[dict[str, Any]] = []
        quality: int | None = None
        judge_prose = False
        if judged is not None and calls is None:
            judge_prose = self.judge_prose_left > 0
            if judge_prose:
                self.judge_prose_left -= 1
            content, _ = judge_content(judged, cfg.seed, key, n, judge_prose)
            c_tokens, finish = estimate_tokens(content), "stop"
            if max_tokens is not None and c_tokens > max_tokens:
                content = content.encode("utf-8")[: max_tokens * 4].decode("utf-8", "ignore")
                c_tokens, finish = estimate_tokens(content), "length"
        elif calls is not None:
            content = thought(cfg.seed, task, step, [name for name, _ in calls])
            content, calls, c_tokens, finish = fit_tool_answer(content, calls, max_tokens)
            tool_calls = [
                {
                    "id": f"call_{self._run}{self._seq:010x}{i:02x}",
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
                for i, (name, arguments) in enumerate(calls)
            ]
        else:
            lo, hi = cfg.output_tokens
            length = scripted_tokens(messages)
            if length is not None:
                lo = hi = length
            plan_size = planned_subtasks(prompt)
            note: str | None = None
            tail = ""
            if not plan_size:
                rounds = memory_rounds(messages)
                quality = answer_quality(cfg.seed, key, n, rounds, cfg.drift_after_rounds)
                tail = quality_mark(quality)
                if cfg.drift_after_rounds is not None:
                    note = drift_line(messages, rounds, cfg.drift_after_rounds)
            if not prose and (plan_size or broken_json or wants_json(body)):
                content = build_json_answer(
                    prompt,
                    d.u_filler,
                    plan_size,
                    broken_json,
                    folded_results(results) if results else None,
                    note,
                    tail,
                )
                c_tokens, finish = estimate_tokens(content), "stop"
                if max_tokens is not None and c_tokens > max_tokens:
                    content = content.encode("utf-8")[: max_tokens * 4].decode("utf-8", "ignore")
                    c_tokens, finish = estimate_tokens(content), "length"
            else:
                extra = "\n".join(x for x in (quote_results(results) if results else None, note) if x)
                content, c_tokens, finish = build_answer(
                    prompt, d.answer_tokens(lo, hi), d.u_filler, max_tokens, extra or None, tail
                )
        reasoning: str | None = None
        r_tokens = 0
        if reasoning_on:
            reasoning = reasoning_text(task, step, [name for name, _ in calls] if calls else None, len(results))
            r_tokens = estimate_tokens(reasoning)
        usage = {
            "prompt_tokens": p_tokens,
            "completion_tokens": c_tokens + r_tokens,
            "total_tokens": p_tokens + c_tokens + r_tokens,
            "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": r_tokens,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }
        completion_id = "chatcmpl-sim" + request_id[7:]
        created = int(time.time())
        writing_s = (c_tokens + r_tokens) / cfg.tokens_per_s if cfg.tokens_per_s else 0.0
        if stream:
            if calls is None:
                assert content is not None
                pieces = split_pieces(content)
            else:
                pieces = split_pieces(content) if content else []
            thinking = split_pieces(reasoning) if reasoning else []
            deltas = _tool_deltas(tool_calls)
            total = len(thinking) + len(pieces) + len(deltas)
            plan = StreamPlan(
                pieces,
                finish,
                usage,
                include_usage,
                max(1, total // 3) if stall else None,
                thinking,
                deltas,
                content is None,
                writing_s / max(1, total),
            )
            return Reply(
                200,
                headers,
                None,
                latency,
                stream=plan,
                prompt=prompt,
                key=key,
                meta=(completion_id, created, model),
                tool_calls=len(tool_calls),
                judge=judged.kind if judged is not None else None,
                judge_prose=judge_prose,
                quality=quality,
            )
        message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None, "annotations": []}
        if reasoning is not None:
            message["reasoning_content"] = reasoning
        if tool_calls:
            message["tool_calls"] = tool_calls
        completion = {
            "id": completion_id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": finish,
                }
            ],
            "usage": usage,
            "service_tier": "default",
            "system_fingerprint": "fp_swarm_sim",
        }
        return Reply(
            200,
            headers,
            completion,
            latency + writing_s,
            prompt=prompt,
            key=key,
            meta=(completion_id, created, model),
            tool_calls=len(tool_calls),
            judge=judged.kind if judged is not None else None,
            judge_prose=judge_prose,
            quality=quality,
        )


def _counters(s: _Stats) -> dict[str, Any]:
    """The JSON form of one set of chat counters (the live ones, or the batch lines')."""
    return {
        "requests": s.requests,
        "by_status": dict(sorted(s.by_status.items())),
        "successes": s.successes,
        "rate_limited": s.rate_limited,
        "quota_errors": s.quota_errors,
        "server_errors": s.server_errors,
        "client_errors": s.client_errors,
        "hangs": s.hangs,
        "stream_stalls": s.stream_stalls,
        "streams": s.streams,
        "scripted": s.scripted,
        "cache_hits": s.cache_hits,
        "tokens": {"prompt": s.prompt_tokens, "completion": s.completion_tokens, "cached": s.cached_tokens},
        "duplicate_successes": s.duplicate_successes,
        "tool_steps": s.tool_steps,
        "tool_calls": s.tool_calls,
        "judge": {
            "requests": s.judge_requests,
            "pointwise": s.judge_pointwise,
            "pairwise": s.judge_pairwise,
            "prose": s.judge_prose,
        },
        "quality": {
            "answers": s.quality_answers,
            "mean": round(s.quality_sum / s.quality_answers, 2) if s.quality_answers else None,
        },
        "successes_by_prompt": dict(s.successes_by_prompt),
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
