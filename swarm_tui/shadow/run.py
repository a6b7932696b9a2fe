"""Running a shadow comparison: every request of the workload (a job file, or a built-in probe
workload at a steady rate) goes to the primary; a `rate` share of them, spread evenly, is sent to
the secondary at the same moment. Each request is sent once (no retries: the endpoints' own error
rates are what is being measured), through one shared `ProviderClient` (`AsyncOpenAI`) per
endpoint. Per endpoint: p50 / p95 / p99 latency, time to first token when streaming, errors by
class, tokens and cost (the secondary's is shadow cost, reported apart). For every mirrored pair
that both answered: exact agreement, JSON equality (code fences tolerated) and the length ratio;
with a judge (`ShadowConfig.judge`), which of the two answers is better (`judging`), billed apart.
What is counted is `measure`'s; the decision on it is `verdict`'s.
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from swarm_tui.core.errors import InputError
from swarm_tui.engine.stats import latency_summary
from swarm_tui.pricing import Price, PriceTable
from swarm_tui.pricing.currency import DisplayCurrency
from swarm_tui.providers.client import ProviderClient, StreamDeadlines
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.shadow.config import ShadowConfig, ShadowJudge, mirrored
from swarm_tui.shadow.judging import PairJudge
from swarm_tui.shadow.measure import Agreement, EndpointStats
from swarm_tui.shadow.report import safe_url
from swarm_tui.shadow.verdict import PENDING, ROLLBACK, ShadowReport, decide, decide_judged, judgement

if TYPE_CHECKING:
    from swarm_tui.sim import SimServer

SIM_MODEL = "sim-1"

PROBE_PROMPTS = (
    'Reply with exactly this JSON and nothing else: {"status": "ok", "check": 7}',
    "In one sentence: what does a token-bucket rate limiter do?",
    "Return only a JSON array of the first five prime numbers.",
    "What is 17 * 23? Answer with the number only.",
    "Name three common causes of HTTP 429 responses, comma separated.",
    'Return only JSON: {"languages": ["Python", "Go"], "count": 2}',
    "Summarise in ten words: retries need backoff with jitter.",
    "Translate to English: 分散推論は遅くならない。",
)
"""The built-in workload: short, cheap, partly JSON so that answers can be compared structurally."""


class _Endpoint:
    def __init__(
        self, label: str, profile: ProviderProfile, model: str | None, price: Price | None, currency: DisplayCurrency
    ) -> None:
        self.label, self.profile, self.model = label, profile, model
        self.price, self.currency = price, currency
        self.sim: SimServer | None = None
        self.client: ProviderClient | None = None
        self.stats: EndpointStats | None = None


class ShadowRun:
    """One shadow comparison; `await run()` once. `snapshot()` and `stop()` work while it runs."""

    def __init__(self, config: ShadowConfig, on_update: Callable[[ShadowReport], None] | None = None) -> None:
        config.check()
        self.config = config
        self.on_update = on_update
        self.table = PriceTable.builtin(config.prices, billing=config.billing)
        primary_model = config.model or config.primary.model or (SIM_MODEL if config.primary.is_simulator else None)
        secondary_model = (
            config.secondary_model
            or config.model
            or config.secondary.model
            or (SIM_MODEL if config.secondary.is_simulator else None)
            or primary_model
        )
        if config.bodies is None:
            if primary_model is None:
                raise InputError.single(
                    "--model", "model", f"the primary ({config.primary.name}) names no model: pass --model"
                )
        self.endpoints = [
            self._endpoint("primary", config.primary, primary_model),
            self._endpoint("secondary", config.secondary, secondary_model),
        ]
        self.judge_endpoint: _Endpoint | None = None
        """The judge's own endpoint (None: no judge, or the primary judges)."""
        self.judge: PairJudge | None = None
        if config.judge is not None:
            self._set_up_judge(config.judge, primary_model)
        self._stop = asyncio.Event()
        self._started_wall = time.time()
        self._run_id = f"{int(self._started_wall * 1000) % 0xFFFFFF:06x}"
        """Tags this run's probes, so no two runs send the same body (no cached answers)."""
        self._t0: float | None = None
        self._ended: float | None = None
        self._pairs: dict[int, dict[str, str | None]] = {}
        self._bodies: dict[int, dict[str, Any]] = {}
        """The primary's body of each mirrored request still in flight (what the judge is shown as the task)."""
        self._agreement = Agreement()
        self._paired_primary: list[float] = []
        self._finished = False
        self._stopped_early = False
        self._tasks: set[asyncio.Task[None]] = set()

    def _endpoint(self, label: str, profile: ProviderProfile, model: str | None) -> _Endpoint:
        """An endpoint of the run, priced and its currency chosen for its provider."""
        return _Endpoint(
            label,
            profile,
            model,
            self.table.lookup(model, profile.name),
            self.config.currency.for_provider(self.table, profile.name),
        )

    def _set_up_judge(self, rule: ShadowJudge, primary_model: str | None) -> None:
        """The pair judge: on an endpoint of its own, or the primary's (`--judge self`), billed apart."""
        config = self.config
        judge_profile = rule.endpoint
        if judge_profile is None:  # --judge self
            judge_model = rule.model or primary_model
            judge_name = config.primary.name
        else:
            judge_model = (
                rule.model
                or judge_profile.model
                or (SIM_MODEL if judge_profile.is_simulator else None)
                or primary_model
            )
            judge_name = judge_profile.name
            self.judge_endpoint = self._endpoint("judge", judge_profile, judge_model)
        self.judge = PairJudge(
            rule,
            name=judge_name,
            base_url=safe_url((judge_profile or config.primary).base_url or ""),
            model=judge_model,
            price=self.table.lookup(judge_model, judge_name),
            currency=config.currency.for_provider(self.table, judge_name),
            timeout_s=config.timeout_s,
        )

    # ----------------------------------------------------------------- control

    def stop(self) -> None:
        """End the traffic now; requests in flight finish, the report says it stopped early."""
        if not self._stop.is_set():
            self._stopped_early = True
            self._stop.set()
            if self.judge is not None:
                self.judge.stopped = True

    def snapshot(self) -> ShadowReport:
        return self._report()

    # ----------------------------------------------------------------- running

    async def run(self) -> ShadowReport:
        await self._open()
        ticker = asyncio.create_task(self._tick(), name="shadow-ticker") if self.on_update else None
        try:
            await self._send_workload()
            await self._drain()
        finally:
            if ticker:
                ticker.cancel()
            judging = self.judge.tasks if self.judge is not None else set()
            for task in [*self._tasks, *judging]:
                task.cancel()
            if self._tasks or judging:
                await asyncio.gather(*self._tasks, *judging, return_exceptions=True)
            self._ended = time.monotonic()
            self._finished = True
            await self._close()
        report = self._report()
        if self.on_update:
            self.on_update(report)
        return report

    async def _open(self) -> None:
        # nothing is sent before every client exists: a missing key fails here, with nothing spent
        for ep in self._all_endpoints():
            if ep.profile.is_simulator:
                from swarm_tui.sim import SimConfig, SimServer

                sim_config = self.config.sim or SimConfig(latency_ms=40.0, latency_sigma=0.3, seed=7)
                ep.sim = await asyncio.to_thread(SimServer(sim_config).start, mode="thread")
                base_url = ep.sim.base_url
            else:
                base_url = ep.profile.base_url
            try:
                ep.client = ProviderClient(ep.profile, base_url, attempt_timeout_s=self.config.timeout_s)
            except BaseException:
                await self._close()
                raise
            ep.stats = EndpointStats(ep.label, ep.profile, base_url, ep.model, ep.price, ep.currency)
        if self.judge is not None:
            judge_ep = self.judge_endpoint or self.endpoints[0]  # --judge self: the primary's client
            self.judge.client = judge_ep.client
            if judge_ep.stats is not None:
                self.judge.base_url = safe_url(judge_ep.stats.base_url)

    def _all_endpoints(self) -> list[_Endpoint]:
        return [*self.endpoints, *([self.judge_endpoint] if self.judge_endpoint is not None else [])]

    async def _close(self) -> None:
        if self.judge is not None:
            self.judge.client = None
        for ep in self._all_endpoints():
            if ep.client is not None:
                await ep.client.aclose()
                ep.client = None
            if ep.sim is not None:
                await asyncio.to_thread(ep.sim.stop)
                ep.sim = None

    async def _send_workload(self) -> None:
        config = self.config
        gate = asyncio.Semaphore(config.max_in_flight)
        interval = 1.0 / config.rps
        loop = asyncio.get_running_loop()
        self._t0 = start = loop.time()
        i = 0
        while not self._stop.is_set():
            due = start + i * interval
            if due - start >= config.duration_s or (config.bodies is not None and i >= len(config.bodies)):
                break
            delay = due - loop.time()
            if delay > 0:
                try:
                    await asyncio.wait_for(self._stop.wait(), delay)
                    break
                except TimeoutError:
                    pass
            body = self._body(i)
            mirror = mirrored(i, config.rate)
            for _ in range(2 if mirror else 1):  # both slots first: the pair leaves together
                await gate.acquire()
            if mirror:
                self._pairs[i] = {}
            if mirror:
                self._bodies[i] = body
            self._launch(self.endpoints[0], body, i, mirror, gate)
            if mirror:
                self._launch(
                    self.endpoints[1], {**body, "model": self.endpoints[1].model or body.get("model")}, i, True, gate
                )
            i += 1

    def _body(self, i: int) -> dict[str, Any]:
        config = self.config
        if config.bodies is not None:
            body = {k: v for k, v in config.bodies[i].items() if k not in ("stream", "stream_options")}
            if self.endpoints[0].model:
                body["model"] = self.endpoints[0].model
            return body
        prompt = PROBE_PROMPTS[i % len(PROBE_PROMPTS)]
        return {
            "model": self.endpoints[0].model,
            "messages": [
                {"role": "system", "content": f"swarm-tui shadow probe {self._run_id}#{i}. Answer briefly."},
                {"role": "user", "content": prompt},
            ],
            "max_tokens": config.max_tokens,
            "temperature": 0,
        }

    def _launch(self, ep: _Endpoint, body: dict[str, Any], i: int, paired: bool, gate: asyncio.Semaphore) -> None:
        assert ep.stats is not None
        ep.stats.sent += 1
        ep.stats.in_flight += 1
        task = asyncio.create_task(self._call(ep, body, i, paired, gate))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _call(self, ep: _Endpoint, body: dict[str, Any], i: int, paired: bool, gate: asyncio.Semaphore) -> None:
        assert ep.client is not None and ep.stats is not None
        timeout = self.config.timeout_s
        started = time.perf_counter()
        content: str | None = None
        try:
            async with asyncio.timeout(timeout):
                result = await ep.client.complete(
                    body, stream=self.config.stream, deadlines=StreamDeadlines(first_token_s=timeout, idle_s=timeout)
                )
        except asyncio.CancelledError:
            ep.stats.errors["cancelled"] += 1
            raise
        except Exception as exc:  # noqa: BLE001 - every failure is classified and counted
            ep.stats.errors[str(ep.client.classify(exc).kind)] += 1
        else:
            latency = (time.perf_counter() - started) * 1000
            ep.stats.succeeded(latency, result.ttft_ms, result.usage, result.service_tier)
            content = result.content
            if paired and ep.label == "primary":
                bisect.insort(self._paired_primary, latency)
        finally:
            ep.stats.in_flight -= 1
            gate.release()
        if paired:
            self._pair_done(i, ep.label, content)

    def _pair_done(self, i: int, label: str, content: str | None) -> None:
        pair = self._pairs.get(i)
        if pair is None:
            return
        pair[label] = content
        if len(pair) == 2:
            del self._pairs[i]
            body = self._bodies.pop(i, {})
            if pair["primary"] is not None and pair["secondary"] is not None:
                self._agreement.add(pair["primary"], pair["secondary"])
                if self.judge is not None:
                    self.judge.offer(i, body, pair["primary"], pair["secondary"])

    async def _drain(self) -> None:
        """Let requests in flight finish (each is bounded by the timeout), then the judge's calls."""
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=self.config.timeout_s + 5.0)
        if self.judge is not None:
            await self.judge.settle(quiet_s=2 * self.config.timeout_s + 5.0)

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self.config.update_interval_s)
            if self.on_update:
                self.on_update(self._report())

    # ----------------------------------------------------------------- the report

    def _report(self) -> ShadowReport:
        config = self.config
        reports = []
        for ep in self.endpoints:
            stats = ep.stats or EndpointStats(
                ep.label, ep.profile, ep.profile.base_url or "", ep.model, ep.price, ep.currency
            )
            reports.append(stats.report(config.stream))
        primary, secondary = reports
        verdict, ratio, excess, reasons, notes = decide(
            primary, secondary, threshold=config.threshold, max_error_excess=config.max_error_excess
        )
        judged = self.judge.report(self._agreement.compared) if self.judge is not None else None
        if judged is not None and config.judge is not None:
            rule = config.judge
            judge_rollback, judge_reasons, judge_notes = decide_judged(
                judged, min_pairs=rule.min_pairs, margin=rule.margin, alpha=rule.alpha
            )
            if judge_rollback:
                verdict = ROLLBACK
            reasons += judge_reasons
            notes += judge_notes
            if rule.is_self:
                notes.append("the primary judges (--judge self): its judge calls add load to the endpoint measured")
        if not self._finished and (
            primary.succeeded + primary.failed == 0 or secondary.succeeded + secondary.failed == 0
        ):
            verdict = PENDING  # nothing to judge yet (or no baseline yet)
        if self._stopped_early:
            notes.append("stopped early: the verdict covers the traffic sent until then")
        now = self._ended if self._ended is not None else time.monotonic()
        return ShadowReport(
            started_at=self._started_wall,
            elapsed_s=round(now - self._t0, 3) if self._t0 is not None else 0.0,
            finished=self._finished,
            stopped_early=self._stopped_early,
            settings=self._settings(),
            primary=primary,
            secondary=secondary,
            paired={
                "pairs": secondary.requests,
                "primary_latency_ms": latency_summary(self._paired_primary),
                "secondary_latency_ms": secondary.latency_ms,
            },
            agreement=self._agreement.to_dict(),
            p95_ratio=ratio,
            error_excess=excess,
            verdict=verdict,
            reasons=reasons,
            notes=notes,
            judgement=judgement(
                primary,
                secondary,
                ratio=ratio,
                excess=excess,
                threshold=config.threshold,
                max_error_excess=config.max_error_excess,
                judge=config.judge,
                judged=judged,
            ),
            judged_agreement=judged,
        )

    def _settings(self) -> dict[str, Any]:
        """The settings a report is read against (shadow.json keeps them with the figures)."""
        config = self.config
        judge = config.judge
        return {
            "rate": config.rate,
            "duration_s": config.duration_s,
            "threshold": config.threshold,
            "max_error_excess": config.max_error_excess,
            "rps": config.rps,
            "stream": config.stream,
            "timeout_s": config.timeout_s,
            "workload": config.workload,
            "currency": config.currency.to_dict(),
            "judge": {
                "endpoint": "self" if judge.endpoint is None else judge.endpoint.name,
                "rate": judge.rate,
                "min_pairs": judge.min_pairs,
                "margin": judge.margin,
                "alpha": judge.alpha,
            }
            if judge is not None
            else None,
        }


async def run_shadow(config: ShadowConfig, on_update: Callable[[ShadowReport], None] | None = None) -> ShadowReport:
    """Run one shadow comparison to the end (or until cancelled/stopped) and return its report."""
    return await ShadowRun(config, on_update).run()
