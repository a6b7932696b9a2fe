"""The simulator's state and its per-request decision, independent of HTTP.

``Simulator.chat`` turns one chat-completions request (raw body bytes and the
Authorization header) into a ``Reply``: a status, headers, a JSON body or a stream plan,
and how long to wait before answering. The server (``server.py``) only performs the waits
and writes; it reports back what it actually sent with ``Simulator.finish`` so the
counters in ``stats()`` describe responses that really went out (``counters.py``).

All state lives in one event loop (the server's), so nothing here locks.

The decision is a pipeline; each stage either answers (a refusal, a fault) or hands on what it
learned: endpoint down (503) → API key (401) → body validation (400, tools and tool messages
included: ``request.py``) → a model not served (404, ``only_listed_models``) → context length
(400) → scripted marker (``faults.py``) → rate limits (429, ``rate_limits.py``; every request with
``limit_zero``) → a Flex request without capacity (429 resource unavailable, drawn at
``flex_unavailable_rate``) → random faults (5xx / hang) → the answer (``answering.py``): tool calls
while an agent has tool rounds left (see ``tools.py``), else a judge's verdict for a judge
request, else the text or JSON answer, quoting any tool results and carrying its quality mark
(``judging.py``) → the reply (``reply.py``). A judge request ignores scripted markers quoted in
what it judges. The request's ``service_tier`` is echoed in its answer; a Flex answer takes
``flex_latency_factor`` times as long, a Priority one ``priority_latency_factor`` times.
A body drawn slow (``slow_rate``, drawn once per body: its first sighting's draw) takes
``slow_factor`` times its drawn latency, every time it is sent. Inside the quota window
(``quota_at_s`` .. + ``quota_for_s`` on the simulator's clock) every valid request is answered
429 ``insufficient_quota`` before anything else is decided (not charged, not answered).
Rate-limit refusals and validation errors are answered at once; everything
admitted waits its drawn latency first.

The Batch API (``batches.py``, held in ``Simulator.batches``) answers each batch line with
``chat_offline``: the same ``chat`` decision (answers, usage, cached tokens, markers, seeding,
faults), but outside the live rate limits and counted in ``stats()["batch"]["chat"]``, never
in the live ``requests``/``successes``/... counters.
"""

from __future__ import annotations

import os
import time
from typing import Any

from swarm_tui.sim import error_bodies
from swarm_tui.sim.answering import (
    Answer,
    add_reasoning,
    agent_turn,
    final_answer,
    judge_answer,
    orchestrator_answer,
    tool_step,
)
from swarm_tui.sim.batches import BatchStore
from swarm_tui.sim.config import SimConfig
from swarm_tui.sim.counters import ChatCounters
from swarm_tui.sim.draws import Draws, Occurrences, draw, request_key
from swarm_tui.sim.error_bodies import Refusal
from swarm_tui.sim.faults import Faults, drawn_fault, find_marker, marker_message, scripted_fault
from swarm_tui.sim.judging import judge_request
from swarm_tui.sim.orchestrating import orchestrate
from swarm_tui.sim.prefix_cache import PrefixCache
from swarm_tui.sim.rate_limits import RateLimiter, openai_duration, retry_after_headers
from swarm_tui.sim.reply import Reply, StreamPlan, answer_reply
from swarm_tui.sim.request import Call, ChatRequest, endpoint_refusal, read_chat_request
from swarm_tui.sim.tokens import last_user_text, prompt_tokens

__all__ = ["Simulator", "Reply", "StreamPlan"]

ZERO_LIMIT_HEADERS = {
    "x-ratelimit-limit-requests": "0",
    "x-ratelimit-remaining-requests": "0",
    "x-ratelimit-reset-requests": "1s",
}
"""What a 429 of ``limit_zero`` states: a limit of 0 requests a minute, none left."""

#: the limiter batch lines see: the live RPM/TPM buckets do not apply to the Batch API
_UNLIMITED = RateLimiter(None, None)


class Simulator:
    """One simulated endpoint: config, rate-limit buckets, prefix cache, memory, counters."""

    def __init__(self, config: SimConfig | None = None, clock=time.monotonic) -> None:
        self._clock = clock
        self.config = config or SimConfig()
        self._run = os.urandom(4).hex()
        self._seq = 0
        self.in_flight = 0
        self._started = time.time()
        self._origin = clock()
        """Where the quota window's clock starts: the start, a reset, a patch of ``quota_at_s``."""
        self._reset_memory()

    # -- admin --------------------------------------------------------------------------

    def _reset_memory(self) -> None:
        cfg = self.config
        self.limiter = RateLimiter(cfg.rpm, cfg.tpm, cfg.burst_s, self._clock)
        self.cache = PrefixCache(cfg.cache_min_tokens)
        self.seen = Occurrences()
        self.marker_seen = Occurrences()
        self.stats_ = ChatCounters()
        #: the most chat requests the server held at once (how much concurrency a client used)
        self.peak_in_flight = 0
        #: counters of the Batch API lines' ``chat`` calls (``chat_offline``), apart from the live ones
        self.batch_stats_ = ChatCounters()
        self.batches = BatchStore(self, self._clock, self._run)
        #: judge verdicts still to be written as prose (``judge_prose_first``)
        self.judge_prose_left = cfg.judge_prose_first
        #: answering a Batch API line (``chat_offline``): no live tier's capacity applies
        self.offline = False

    def reset(self) -> None:
        """Zero the counters and forget bodies seen, cached prefixes and bucket levels, and the
        Batch API's files and batches; the quota window's clock starts again."""
        self._origin = self._clock()
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
        if "quota_at_s" in patch:
            self._origin = self._clock()
        return new

    def quota_spent(self) -> bool:
        """Inside the quota window now (``quota_at_s``, ``quota_for_s``)."""
        at = self.config.quota_at_s
        if at is None or self.offline:
            return False
        since = self._clock() - self._origin
        return at <= since < at + self.config.quota_for_s

    def stats(self) -> dict[str, Any]:
        """The live chat counters, ``in_flight``, ``uptime_s``, ``config``, and ``batch``: the
        Batch API's counters (``BatchStore.stats``) with ``batch["chat"]``, the same chat
        counters as the top level's but of the batch lines only (never counted at the top)."""
        return {
            **self.stats_.to_dict(),
            "in_flight": self.in_flight,
            "peak_in_flight": self.peak_in_flight,
            "uptime_s": round(time.time() - self._started, 3),
            "batch": {**self.batches.stats(), "chat": self.batch_stats_.to_dict()},
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
        self.stats_, self.limiter, self.offline = self.batch_stats_, _UNLIMITED, True
        try:
            reply = self.chat(raw, authorization)
            self.finish(reply)
        finally:
            self.stats_, self.limiter, self.offline = live_stats, live_limiter, False
        return reply

    # -- bookkeeping the server reports back ------------------------------------------------

    def finish(self, reply: Reply, status: int | None = None) -> None:
        """Count a response that was actually sent (``status`` overrides reply.status)."""
        self.stats_.count(reply, status)

    def hung(self) -> None:
        self.stats_.hangs += 1

    def stalled(self) -> None:
        self.stats_.stream_stalls += 1

    def streamed(self) -> None:
        """A stream's headers went out (its chunks follow)."""
        self.stats_.streams += 1

    # -- the decision ---------------------------------------------------------------------

    def chat(self, raw: bytes, authorization: str | None) -> Reply:
        """Decide the answer to one ``POST /v1/chat/completions``: each stage below answers the
        request (an error, a hang) or hands on what it learned, in the order the module says."""
        self.stats_.requests += 1
        self._seq += 1
        request_id = f"req_sim{self._run}{self._seq:010x}"
        headers = {"x-request-id": request_id}
        # who may ask, and what was asked
        denied = endpoint_refusal(self.config, authorization)
        if denied is not None:
            return self._error(denied, headers)
        request = read_chat_request(raw)
        if isinstance(request, Refusal):
            return self._error(request.status_body, headers)
        if self.config.only_listed_models and request.model not in self.config.models:  # not served here
            return self._error(error_bodies.model_not_found(request.model), headers)
        if self.quota_spent():  # the account's quota is spent: nothing else is decided
            return self._error(error_bodies.insufficient_quota(), headers, "quota")
        call = self._call(request, request_id, headers)
        # refused at once: too long for the context, a scripted fault, the rate limits
        if call.prompt_tokens + (request.max_tokens or 0) > self.config.context_window:
            window = self.config.context_window
            return self._refuse(
                call, Refusal(error_bodies.context_length_exceeded(window, call.prompt_tokens, request.max_tokens or 0))
            )
        faults = self._scripted(call)
        if isinstance(faults, Refusal):
            return self._refuse(call, faults)
        limited = self._rate_limit(call)
        if limited is not None:
            return self._refuse(call, limited)
        # admitted: its draws, its cached prefix, a random fault after the drawn latency
        draws = draw(self.config.seed, call.key, call.occurrence)
        slowdown = self._tier_slowdown(request.service_tier)
        if request.service_tier == "flex" and not self.offline and draws.u_tier < self.config.flex_unavailable_rate:
            return self._refuse(call, Refusal(error_bodies.resource_unavailable(request.model), "flex_unavailable"))
        latency = draws.latency_s(self.config.latency_ms * slowdown, self.config.latency_sigma)
        if self._slow_body(call, draws):
            latency *= self.config.slow_factor
        cached = self.cache.observe(request.messages)
        if not (faults.hang or faults.stall):
            fault = drawn_fault(self.config, draws, request.stream)
            if fault == "error":
                status_body = error_bodies.server_error(draws.server_error_status())
                return self._error(status_body, headers, delay_s=latency, prompt=call.prompt, key=call.key)
            faults.hang, faults.stall = fault == "hang", fault == "stall"
        if faults.hang:
            body = error_bodies.server_error(504)[1]
            return Reply(504, headers, body, self.config.hang_s, hang=True, prompt=call.prompt, key=call.key)
        # the answer, and the reply that carries it
        answer = self._answer(call, draws, faults)
        tokens_per_s = self.config.tokens_per_s
        return answer_reply(
            call,
            answer,
            cached=cached,
            latency_s=latency,
            tokens_per_s=tokens_per_s / slowdown if tokens_per_s else None,
            stall=faults.stall,
        )

    def _slow_body(self, call: Call, draws: Draws) -> bool:
        """A body drawn slow (``slow_rate``): its first sighting's draw decides, for every sending."""
        rate = self.config.slow_rate
        if not rate:
            return False
        first = draws if call.occurrence == 0 else draw(self.config.seed, call.key, 0)
        return first.u_slow < rate

    def _tier_slowdown(self, tier: str) -> float:
        """How much longer than a default answer one of `tier` takes (Flex slower, Priority faster)."""
        if tier == "flex":
            return self.config.flex_latency_factor
        return self.config.priority_latency_factor if tier == "priority" else 1.0

    def _call(self, request: ChatRequest, request_id: str, headers: dict[str, str]) -> Call:
        """What the simulator learns of a valid request before deciding: its body's hash and how
        many times that body was seen before (the draws' seed), its prompt, whether a judge asks."""
        messages = request.messages
        judged = judge_request(messages)
        if judged is not None:
            self.stats_.judge_requests += 1
        key = request_key(request.body)
        occurrence = self.seen.next(key)
        tokens = prompt_tokens(messages)
        if request.tools is not None:
            tokens += request.tools.tokens
        return Call(request, request_id, headers, key, occurrence, last_user_text(messages), tokens, judged)

    def _scripted(self, call: Call) -> Faults | Refusal:
        """The request's scripted fault: the first marker of its messages, while it applies (a judge
        request quotes a task and answers: their markers are not its own)."""
        request = call.request
        marker_text = marker_message(request.messages) if call.judged is None else ""
        marker = find_marker(marker_text) if marker_text else None
        if marker is None:
            return Faults()
        occurrence = self.marker_seen.next(marker_text)
        if not marker.applies(occurrence):
            return Faults()
        self.stats_.scripted += 1
        return scripted_fault(
            marker.code_at(occurrence),
            stream=request.stream,
            model=request.model,
            config=self.config,
            prompt_tokens=call.prompt_tokens,
            max_tokens=request.max_tokens,
        )

    def _rate_limit(self, call: Call) -> Refusal | None:
        """Charge the request to the RPM/TPM buckets (prompt + max_tokens, or the longest answer),
        or the 429 saying when to come back; an admitted request carries the limits' headers."""
        limiter = self.limiter
        request = call.request
        if self.config.limit_zero and not self.offline:  # no allowance at all: no wait brings room
            status_body = error_bodies.rate_limited("requests", request.model, 0, 0, 1, "1s")
            return Refusal(status_body, "rate_limited", {**retry_after_headers(1.0), **ZERO_LIMIT_HEADERS})
        if not limiter.active:
            return None
        max_tokens = request.max_tokens
        cost = call.prompt_tokens + (max_tokens if max_tokens is not None else self.config.output_tokens[1])
        adm = limiter.admit(cost)
        if not adm.ok:
            if adm.too_large:
                return Refusal(error_bodies.request_too_large(request.model, adm.limit, cost), "rate_limited")
            requested = 1 if adm.kind == "requests" else cost
            wait = openai_duration(adm.wait_s)
            status_body = error_bodies.rate_limited(
                adm.kind or "requests", request.model, adm.limit, adm.used, requested, wait
            )
            return Refusal(status_body, "rate_limited", retry_after_headers(adm.wait_s))
        if self.config.rate_headers and self.config.rate_headers_on_success:
            call.headers.update(limiter.headers())
        return None

    def _answer(self, call: Call, draws: Draws, faults: Faults) -> Answer:
        """The assistant's message: a tool step, a judge's verdict (the next ``judge_prose_first``
        ones as prose), or the final answer; with its reasoning when reasoning is on."""
        cfg = self.config
        turn = agent_turn(cfg, call.request)
        orchestration = orchestrate(cfg.seed, call.request.messages, call.request.tools)
        if orchestration is not None:
            answer = orchestrator_answer(orchestration, turn, cfg, call, f"call_{call.key[:16]}{call.occurrence:04x}")
        elif call.judged is not None and turn.calls is None:
            prose = self.judge_prose_left > 0
            if prose:
                self.judge_prose_left -= 1
            answer = judge_answer(call.judged, cfg, call, prose)
        elif turn.calls is not None:
            # ids from the request itself, as every other draw: the same history gets the same ids
            # whichever order requests arrive in (a run here and on Ray agree to the token)
            answer = tool_step(cfg, turn, call.request.max_tokens, f"call_{call.key[:16]}{call.occurrence:04x}")
        else:
            answer = final_answer(cfg, call, draws, turn.results, faults)
        if turn.reasoning:
            add_reasoning(answer, turn)
        return answer

    def _refuse(self, call: Call, refusal: Refusal) -> Reply:
        headers = {**call.headers, **refusal.headers} if refusal.headers else call.headers
        return self._error(refusal.status_body, headers, refusal.category, prompt=call.prompt, key=call.key)

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
