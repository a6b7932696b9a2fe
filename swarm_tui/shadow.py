"""`swarm-tui shadow`: judge the endpoint that carries the traffic against a baseline that a share
of it is mirrored to, the way the source article does when it migrates: `--primary` is the relay
it moved to (all traffic), `--secondary` the official endpoint (10% mirrored for 600 s); "118 ms
vs 184 ms P95, under the 2x rollback threshold -> adopt".

Every request of the workload (a job file, or a built-in probe workload at a steady rate) goes
to the primary; a `rate` share of them, spread evenly, is sent to the secondary at the same
moment. Each request is sent once (no retries: the endpoints' own error rates are what is being
measured), through one shared `ProviderClient` (`AsyncOpenAI`) per endpoint. Per endpoint: p50 /
p95 / p99 latency, time to first token when streaming, errors by class, tokens and cost (the
secondary's is shadow cost, reported apart). For every mirrored pair that both answered: exact
agreement, JSON equality (code fences tolerated) and the length ratio.

Verdict: the primary is judged, the secondary is its baseline. ROLLBACK (go back to the
secondary) when the primary's p95 latency is more than `threshold` times the secondary's, when
the primary's error rate is more than `max_error_excess` above the secondary's (with at least two
errors: one error alone never decides), or when the primary answered nothing; otherwise ADOPT
(keep the primary).

`run_shadow(config, on_update=...)` is the core, for the CLI and the TUI alike: `on_update`
receives a `ShadowReport` snapshot a few times a second and the final one at the end;
`ShadowRun.stop()` ends the traffic early (the report says so).
"""

from __future__ import annotations

import asyncio
import bisect
import json
import math
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse, urlunparse

from .currency import USD, DisplayCurrency
from .engine.stats import latency_summary
from .errors import InputError
from .pricing import Price, PriceTable
from .providers.client import ProviderClient, StreamDeadlines
from .providers.profile import ProviderProfile, is_loopback_url
from .providers.usage import Usage
from .swarm.json_repair import json_answer

if TYPE_CHECKING:
    from .sim import SimServer

ADOPT, ROLLBACK = "ADOPT", "ROLLBACK"
PENDING = "PENDING"
"""The verdict of a live snapshot before both endpoints have finished a request."""
EXIT_ADOPT, EXIT_ROLLBACK, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130
SIM_MODEL = "sim-1"
MIN_CONFIDENT_SAMPLES = 20
"""Below this many successful answers from the secondary (the baseline, which gets only the mirrored
share) the report flags its verdict as indicative."""

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


# --------------------------------------------------------------------------- configuration


@dataclass
class ShadowConfig:
    primary: ProviderProfile
    """The endpoint judged: it carries all the traffic (the one migrated to)."""
    secondary: ProviderProfile
    """The baseline: gets the mirrored share; a ROLLBACK goes back to it."""
    model: str | None = None
    """The model asked of the primary (and of the secondary unless `secondary_model`); None keeps
    the model each job body names."""
    secondary_model: str | None = None
    rate: float = 0.1
    duration_s: float = 600.0
    threshold: float = 2.0
    """ROLLBACK when the primary's p95 is more than this many times the secondary's."""
    max_error_excess: float = 0.01
    """ROLLBACK when the primary's error rate exceeds the secondary's by more than this (0.01 = 1 point)."""
    rps: float = 2.0
    """Requests a second sent to the primary (steady, open loop)."""
    bodies: list[dict[str, Any]] | None = None
    """A job's request bodies, sent in order (once each); None: the built-in probe workload."""
    workload: str = "probe"
    stream: bool = False
    timeout_s: float = 30.0
    max_tokens: int = 64
    """max_tokens of probe requests."""
    max_in_flight: int = 256
    prices: dict[str, Any] = field(default_factory=dict)
    billing: dict[str, Any] = field(default_factory=dict)
    currency: DisplayCurrency = USD
    sim: Any = None
    """SimConfig for endpoints that are the built-in `sim` profile (each gets its own simulator)."""
    update_interval_s: float = 0.5

    def problems(self) -> list[tuple[str, str]]:
        out = []
        if not 0 < self.rate <= 1:
            out.append(("--rate", f"must be a share in (0, 1], e.g. 0.1 for 10%, not {self.rate!r}"))
        for name, value in (
            ("--duration", self.duration_s),
            ("--threshold", self.threshold),
            ("--rps", self.rps),
            ("--timeout", self.timeout_s),
        ):
            if not value > 0:
                out.append((name, f"must be greater than 0, not {value!r}"))
        if not 0 <= self.max_error_excess <= 1:
            out.append(("--max-error-excess", f"must be between 0 and 1, not {self.max_error_excess!r}"))
        if self.bodies is not None and not self.bodies:
            out.append(("--job", "the job has no request"))
        if not out and self.expected_mirrored() < 1:
            out.append(
                (
                    "--rate",
                    f"{self.rate:g} of {self.expected_requests()} request(s) mirrors none to the "
                    "secondary: raise --rate, --duration or --rps",
                )
            )
        return out

    def check(self) -> None:
        problems = self.problems()
        if problems:
            raise InputError.single("shadow", problems[0][0], problems[0][1])

    def expected_requests(self) -> int:
        n = max(1, math.ceil(self.duration_s * self.rps - 1e-9))
        return min(n, len(self.bodies)) if self.bodies is not None else n

    def expected_mirrored(self) -> int:
        return sum(1 for i in range(self.expected_requests()) if mirrored(i, self.rate))


def mirrored(i: int, rate: float) -> bool:
    """Whether request `i` (0-based) goes to the secondary too: exactly `rate` of them, evenly spread."""
    return math.floor((i + 1) * rate + 1e-9) > math.floor(i * rate + 1e-9)


def endpoint_profile(
    spec: str, config: Any, *, label: str, model: str | None = None, api_key_env: str | None = None
) -> ProviderProfile:
    """`--primary`/`--secondary`: a profile name from the config, or a base URL."""
    if "://" in spec:
        profile = ProviderProfile(
            name=endpoint_name(spec), base_url=spec, model=model, api_key_env=api_key_env or "OPENAI_API_KEY"
        )
        problem = profile.problem()
        if problem:
            raise InputError.single(f"--{label}", problem[0], problem[1])
        return profile
    profile = config.profile(spec).with_overrides(model=model, api_key_env=api_key_env)
    problem = profile.problem()
    if problem:
        raise InputError.single(f"--{label}", problem[0], problem[1])
    return profile


def endpoint_name(url: str) -> str:
    """A provider name for a base URL, used to find its prices: `https://api.holysheep.ai/v1` →
    `holysheep`; a loopback or IP address → `host:port` (official prices apply)."""
    parsed = urlparse(url)
    host = (parsed.hostname or "").lower()
    if is_loopback_url(url) or re.fullmatch(r"[\d.:]+", host) or "." not in host:
        return f"{host}:{parsed.port}" if parsed.port else host or "endpoint"
    labels = [part for part in host.split(".") if part not in ("api", "www")]
    return labels[-2] if len(labels) >= 2 else labels[0]


def safe_url(url: str) -> str:
    """The URL without user info or query string (either may carry a credential)."""
    parsed = urlparse(url)
    netloc = parsed.hostname or ""
    if parsed.port:
        netloc += f":{parsed.port}"
    return urlunparse((parsed.scheme, netloc, parsed.path, "", "", ""))


# --------------------------------------------------------------------------- measurement


@dataclass
class EndpointReport:
    label: str
    name: str
    base_url: str
    model: str | None
    simulated: bool
    requests: int
    in_flight: int
    succeeded: int
    errors: dict[str, int]
    error_rate: float | None
    latency_ms: dict[str, float | None]
    ttft_ms: dict[str, float | None] | None
    tokens: dict[str, int]
    cost_usd: float | None
    cost_display: str
    price: dict[str, Any] | None

    @property
    def failed(self) -> int:
        return sum(self.errors.values())


class _EndpointStats:
    def __init__(
        self,
        label: str,
        profile: ProviderProfile,
        base_url: str,
        model: str | None,
        price: Price | None,
        currency: DisplayCurrency,
    ) -> None:
        self.label, self.profile, self.base_url, self.model = label, profile, base_url, model
        self.price, self.currency = price, currency
        self.sent = 0
        self.in_flight = 0
        self.latencies: list[float] = []
        self.ttfts: list[float] = []
        self.errors: Counter[str] = Counter()
        self.usage = Usage()
        self.cost = 0.0
        self.unpriced = 0

    def succeeded(self, latency_ms: float, ttft_ms: float | None, usage: Usage) -> None:
        bisect.insort(self.latencies, latency_ms)
        if ttft_ms is not None:
            bisect.insort(self.ttfts, ttft_ms)
        self.usage = self.usage + usage
        if self.price is not None:
            self.cost += self.price.cost(usage)
        elif usage.total:
            self.unpriced += 1

    def report(self, streaming: bool) -> EndpointReport:
        finished = len(self.latencies) + sum(self.errors.values())
        cost = self.cost if self.price is not None and not self.unpriced else None
        return EndpointReport(
            label=self.label,
            name=self.profile.name,
            base_url=safe_url(self.base_url),
            model=self.model,
            simulated=self.profile.is_simulator,
            requests=self.sent,
            in_flight=self.in_flight,
            succeeded=len(self.latencies),
            errors=dict(self.errors),
            error_rate=round(sum(self.errors.values()) / finished, 4) if finished else None,
            latency_ms=latency_summary(self.latencies),
            ttft_ms=latency_summary(self.ttfts) if streaming else None,
            tokens={"prompt": self.usage.prompt, "completion": self.usage.completion, "cached": self.usage.cached},
            cost_usd=round(cost, 6) if cost is not None else None,
            cost_display=self.currency.format(cost)
            if cost is not None
            else (f"price unknown for model {self.model!r}" if self.model else "price unknown"),
            price=self.price.to_dict() if self.price else None,
        )


@dataclass
class Agreement:
    compared: int = 0
    exact: int = 0
    json_comparable: int = 0
    json_equal: int = 0
    length_ratios: list[float] = field(default_factory=list)

    def add(self, primary: str, secondary: str) -> None:
        self.compared += 1
        self.exact += primary.strip() == secondary.strip()
        try:
            a, b = json_answer(primary), json_answer(secondary)
        except ValueError:
            pass
        else:
            self.json_comparable += 1
            self.json_equal += a == b
        if primary:
            bisect.insort(self.length_ratios, len(secondary) / len(primary))

    def to_dict(self) -> dict[str, Any]:
        ratios = self.length_ratios
        return {
            "compared": self.compared,
            "exact": self.exact,
            "exact_share": round(self.exact / self.compared, 4) if self.compared else None,
            "json_comparable": self.json_comparable,
            "json_equal": self.json_equal,
            "json_equal_share": round(self.json_equal / self.json_comparable, 4) if self.json_comparable else None,
            "length_ratio": {
                "median": round(ratios[len(ratios) // 2], 3) if ratios else None,
                "mean": round(sum(ratios) / len(ratios), 3) if ratios else None,
                "min": round(ratios[0], 3) if ratios else None,
                "max": round(ratios[-1], 3) if ratios else None,
            },
        }


@dataclass
class ShadowReport:
    started_at: float
    elapsed_s: float
    finished: bool
    stopped_early: bool
    settings: dict[str, Any]
    primary: EndpointReport
    secondary: EndpointReport
    paired: dict[str, Any]
    agreement: dict[str, Any]
    p95_ratio: float | None
    error_excess: float | None
    verdict: str
    reasons: list[str]
    notes: list[str]
    judgement: dict[str, Any]
    """Which endpoint was judged against which, on what figures, and what each verdict means."""

    @property
    def exit_code(self) -> int:
        if self.stopped_early:
            return EXIT_INTERRUPTED
        return EXIT_ADOPT if self.verdict == ADOPT else EXIT_ROLLBACK

    @property
    def shadow_cost_usd(self) -> float | None:
        """What the mirrored traffic cost: kept apart from the primary's (the real run's) cost."""
        return self.secondary.cost_usd

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["shadow_cost_usd"] = self.shadow_cost_usd
        data["exit_code"] = self.exit_code
        return data


def decide(
    primary: EndpointReport, secondary: EndpointReport, *, threshold: float, max_error_excess: float
) -> tuple[str, float | None, float | None, list[str], list[str]]:
    """(verdict, p95 ratio, error-rate excess, reasons, notes): the primary (the endpoint that carries
    the traffic) judged against the secondary (the mirrored baseline, where a ROLLBACK goes back to).

    ratio = primary p95 / secondary p95; excess = primary error rate - secondary error rate."""
    reasons: list[str] = []
    notes: list[str] = []
    rollback = False
    p1, p2 = primary.latency_ms["p95"], secondary.latency_ms["p95"]
    ratio = round(p1 / p2, 3) if p1 is not None and p2 else None
    if primary.succeeded == 0:
        rollback = True
        reasons.append(f"the primary answered none of its {primary.requests} request(s)")
    elif ratio is None:
        notes.append(
            f"no p95 ratio: the secondary (the baseline) answered none of its {secondary.requests} "
            "request(s), so the primary's latency is not judged"
        )
    else:
        rollback = ratio > threshold
        reasons.append(
            f"primary p95 {p1:.0f} ms vs secondary p95 {p2:.0f} ms: ratio {ratio:.2f} "
            f"{'>' if rollback else '<='} threshold {threshold:g}"
        )
    e1, e2 = primary.error_rate, secondary.error_rate or 0.0
    excess = round(e1 - e2, 4) if e1 is not None else None
    if excess is not None:
        if excess > max_error_excess and primary.failed >= 2:
            rollback = True
            reasons.append(
                f"primary error rate {e1:.1%} vs secondary {e2:.1%}: {excess * 100:.1f} points above "
                f"the secondary's (limit {max_error_excess * 100:g})"
            )
        else:
            reasons.append(f"primary error rate {e1:.1%} vs secondary {e2:.1%}")
    if 0 < secondary.succeeded < MIN_CONFIDENT_SAMPLES:
        notes.append(
            f"only {secondary.succeeded} successful answer(s) from the secondary (the baseline): the verdict "
            "is indicative; raise --duration, --rps or --rate for more"
        )
    return (ROLLBACK if rollback else ADOPT), ratio, excess, reasons, notes


def verdict_meaning(verdict: str, primary_name: str, secondary_name: str) -> str:
    """What a verdict asks you to do, in plain words."""
    if verdict == ADOPT:
        return f"keep the primary {primary_name}"
    if verdict == ROLLBACK:
        return f"go back to the secondary {secondary_name}"
    return "waiting for both endpoints' first answers"


def judgement(
    primary: EndpointReport,
    secondary: EndpointReport,
    *,
    ratio: float | None,
    excess: float | None,
    threshold: float,
    max_error_excess: float,
) -> dict[str, Any]:
    """The `judgement` block of shadow.json: which endpoint is judged against which, and on what figures."""
    return {
        "judged": "primary",
        "baseline": "secondary",
        "judged_endpoint": primary.name,
        "baseline_endpoint": secondary.name,
        "primary_p95_ms": primary.latency_ms["p95"],
        "secondary_p95_ms": secondary.latency_ms["p95"],
        "p95_ratio": ratio,
        "p95_ratio_is": "primary p95 / secondary p95",
        "threshold": threshold,
        "primary_error_rate": primary.error_rate,
        "secondary_error_rate": secondary.error_rate,
        "error_excess": excess,
        "error_excess_is": "primary error rate - secondary error rate",
        "max_error_excess": max_error_excess,
        "adopt_means": verdict_meaning(ADOPT, primary.name, secondary.name),
        "rollback_means": verdict_meaning(ROLLBACK, primary.name, secondary.name),
    }


# --------------------------------------------------------------------------- the run


class _Endpoint:
    def __init__(
        self, label: str, profile: ProviderProfile, model: str | None, price: Price | None, currency: DisplayCurrency
    ) -> None:
        self.label, self.profile, self.model = label, profile, model
        self.price, self.currency = price, currency
        self.sim: SimServer | None = None
        self.client: ProviderClient | None = None
        self.stats: _EndpointStats | None = None


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
            _Endpoint(
                "primary",
                config.primary,
                primary_model,
                self.table.lookup(primary_model, config.primary.name),
                config.currency.for_provider(self.table, config.primary.name),
            ),
            _Endpoint(
                "secondary",
                config.secondary,
                secondary_model,
                self.table.lookup(secondary_model, config.secondary.name),
                config.currency.for_provider(self.table, config.secondary.name),
            ),
        ]
        self._stop = asyncio.Event()
        self._started_wall = time.time()
        self._run_id = f"{int(self._started_wall * 1000) % 0xFFFFFF:06x}"
        """Tags this run's probes, so no two runs send the same body (no cached answers)."""
        self._t0: float | None = None
        self._ended: float | None = None
        self._pairs: dict[int, dict[str, str | None]] = {}
        self._agreement = Agreement()
        self._paired_primary: list[float] = []
        self._finished = False
        self._stopped_early = False
        self._tasks: set[asyncio.Task[None]] = set()

    # ----------------------------------------------------------------- control

    def stop(self) -> None:
        """End the traffic now; requests in flight finish, the report says it stopped early."""
        if not self._stop.is_set():
            self._stopped_early = True
            self._stop.set()

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
            for task in list(self._tasks):
                task.cancel()
            if self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)
            self._ended = time.monotonic()
            self._finished = True
            await self._close()
        report = self._report()
        if self.on_update:
            self.on_update(report)
        return report

    async def _open(self) -> None:
        # nothing is sent before both clients exist: a missing key fails here, with nothing spent
        for ep in self.endpoints:
            if ep.profile.is_simulator:
                from .sim import SimConfig, SimServer

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
            ep.stats = _EndpointStats(ep.label, ep.profile, base_url, ep.model, ep.price, ep.currency)

    async def _close(self) -> None:
        for ep in self.endpoints:
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
            ep.stats.succeeded(latency, result.ttft_ms, result.usage)
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
            if pair["primary"] is not None and pair["secondary"] is not None:
                self._agreement.add(pair["primary"], pair["secondary"])

    async def _drain(self) -> None:
        """Let requests in flight finish (each is bounded by the timeout)."""
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=self.config.timeout_s + 5.0)

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self.config.update_interval_s)
            if self.on_update:
                self.on_update(self._report())

    # ----------------------------------------------------------------- the report

    def _report(self) -> ShadowReport:
        config = self.config
        streaming = config.stream
        reports = []
        for ep in self.endpoints:
            stats = ep.stats or _EndpointStats(
                ep.label, ep.profile, ep.profile.base_url or "", ep.model, ep.price, ep.currency
            )
            reports.append(stats.report(streaming))
        primary, secondary = reports
        verdict, ratio, excess, reasons, notes = decide(
            primary, secondary, threshold=config.threshold, max_error_excess=config.max_error_excess
        )
        if not self._finished and (
            primary.succeeded + primary.failed == 0 or secondary.succeeded + secondary.failed == 0
        ):
            verdict = PENDING  # nothing to judge yet (or no baseline yet)
        if self._stopped_early:
            notes.append("stopped early: the verdict covers the traffic sent until then")
        now = self._ended if self._ended is not None else time.monotonic()
        elapsed = round(now - self._t0, 3) if self._t0 is not None else 0.0
        return ShadowReport(
            started_at=self._started_wall,
            elapsed_s=elapsed,
            finished=self._finished,
            stopped_early=self._stopped_early,
            settings={
                "rate": config.rate,
                "duration_s": config.duration_s,
                "threshold": config.threshold,
                "max_error_excess": config.max_error_excess,
                "rps": config.rps,
                "stream": config.stream,
                "timeout_s": config.timeout_s,
                "workload": config.workload,
                "currency": config.currency.to_dict(),
            },
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
            ),
        )


async def run_shadow(config: ShadowConfig, on_update: Callable[[ShadowReport], None] | None = None) -> ShadowReport:
    """Run one shadow comparison to the end (or until cancelled/stopped) and return its report."""
    return await ShadowRun(config, on_update).run()


# --------------------------------------------------------------------------- text


def progress_line(report: ShadowReport) -> str:
    p, s = report.primary, report.secondary

    def side(r: EndpointReport) -> str:
        p95 = r.latency_ms["p95"]
        err = f"{r.error_rate:.1%}" if r.error_rate is not None else "-"
        return f"{r.requests} req p95 {f'{p95:.0f}ms' if p95 is not None else '-'} err {err}"

    ratio = f"{report.p95_ratio:.2f}" if report.p95_ratio is not None else "-"
    return (
        f"shadow {report.elapsed_s:5.1f}s/{report.settings['duration_s']:g}s  primary (judged) {side(p)}  "
        f"secondary (baseline) {side(s)}  p95 ratio {ratio} (max {report.settings['threshold']:g})  "
        f"-> {report.verdict}"
    )


def format_report(report: ShadowReport) -> str:
    p, s = report.primary, report.secondary

    def ms(value: float | None) -> str:
        return f"{value:.0f} ms" if value is not None else "-"

    def errors(r: EndpointReport) -> str:
        if r.error_rate is None:
            return "-"
        detail = ", ".join(f"{k} {v}" for k, v in sorted(r.errors.items()))
        return f"{r.failed} ({r.error_rate:.1%})" + (f": {detail}" if detail else "")

    rows = [
        ("", f"primary {p.name} (judged)", f"secondary {s.name} (baseline)"),
        (
            "endpoint",
            p.base_url + (" SIMULATED" if p.simulated else ""),
            s.base_url + (" SIMULATED" if s.simulated else ""),
        ),
        ("model", str(p.model), str(s.model)),
        ("requests", str(p.requests), f"{s.requests} ({s.requests / p.requests:.0%} mirrored)" if p.requests else "0"),
        ("succeeded", str(p.succeeded), str(s.succeeded)),
        ("errors", errors(p), errors(s)),
        ("latency p50", ms(p.latency_ms["p50"]), ms(s.latency_ms["p50"])),
        ("latency p95", ms(p.latency_ms["p95"]), ms(s.latency_ms["p95"])),
        ("latency p99", ms(p.latency_ms["p99"]), ms(s.latency_ms["p99"])),
    ]
    if p.ttft_ms is not None and s.ttft_ms is not None:
        rows.append(
            (
                "TTFT p50/p95",
                f"{ms(p.ttft_ms['p50'])} / {ms(p.ttft_ms['p95'])}",
                f"{ms(s.ttft_ms['p50'])} / {ms(s.ttft_ms['p95'])}",
            )
        )
    rows += [
        (
            "tokens in/out",
            f"{p.tokens['prompt']:,} / {p.tokens['completion']:,}",
            f"{s.tokens['prompt']:,} / {s.tokens['completion']:,}",
        ),
        ("cost", p.cost_display, s.cost_display + (" (shadow)" if s.cost_usd is not None else "")),
    ]
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    lines = [f"{a.ljust(w0)}  {b.ljust(w1)}  {c}".rstrip() for a, b, c in rows]
    ag = report.agreement
    if ag["compared"]:
        json_part = (
            f"JSON-equal {ag['json_equal']}/{ag['json_comparable']}"
            if ag["json_comparable"]
            else "JSON-equal n/a (no JSON answers)"
        )
        lines.append(
            f"agreement over {ag['compared']} answered pairs: exact {ag['exact_share']:.0%}, {json_part}, "
            f"length ratio median {ag['length_ratio']['median']}"
        )
    else:
        lines.append("agreement: no pair where both endpoints answered")
    paired = report.paired["primary_latency_ms"]["p95"]
    if paired is not None:
        lines.append(f"primary p95 on the mirrored requests only: {paired:.0f} ms")
    settings = report.settings
    points = settings["max_error_excess"] * 100
    lines.append(
        f"judged: the primary {p.name} (all traffic) against the secondary {s.name} (the baseline, "
        f"{settings['rate']:.0%} mirrored)"
    )
    lines.append(
        f"rule: ROLLBACK (exit 1, go back to the secondary) when primary p95 / secondary p95 > "
        f"{settings['threshold']:g} or the primary's error rate is more than {points:g} "
        f"point{'' if points == 1 else 's'} above the secondary's; else ADOPT (exit 0, keep the primary)"
    )
    meaning = verdict_meaning(report.verdict, p.name, s.name)
    reasons = f" ({'; '.join(report.reasons)})" if report.reasons else ""
    lines.append(f"verdict: {report.verdict}: {meaning}{reasons}")
    for note in report.notes:
        lines.append(f"note: {note}")
    return "\n".join(lines)


def write_report(report: ShadowReport, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "shadow.json"
    tmp = out_dir / ".shadow.json.tmp"
    tmp.write_text(json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path
