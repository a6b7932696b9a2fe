"""The options commands share, as argparse sees them: those of `run` and `resume` (provider, engine,
judge, response cache, embedded simulator, traces, console and log) and the display currency of
`estimate` and `shadow`. What they mean for a run is decided past the parser (`cli.request` makes
them a request, `run.resolve` resolves it)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from swarm_tui.core.lanes import LANES
from swarm_tui.core.quota import ON_QUOTA
from swarm_tui.core.tiers import SERVICE_TIERS
from swarm_tui.engine.settings import ON_TRUNCATED
from swarm_tui.frontend.progress_lines import DEFAULT_EVERY_S, LOG_FORMATS
from swarm_tui.jobs.judge_spec import ACTIONS
from swarm_tui.providers.routes import STRATEGIES
from swarm_tui.util.argtypes import (
    byte_size,
    duration,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    share,
    straggler,
    wait_bound,
)

if TYPE_CHECKING:
    from swarm_tui.config import Config
    from swarm_tui.pricing.currency import DisplayCurrency


def add_run_options(p: argparse.ArgumentParser) -> None:
    """The options `run` and `resume` share: provider, engine, judge, embedded simulator."""
    add_provider_options(p)
    add_engine_options(p)
    add_judge_options(p)
    add_answer_options(p)
    add_cache_options(p)
    add_sim_options(p)
    add_trace_options(p)


CACHE_MODES = ("readwrite", "read", "write", "off")


def add_cache_options(p: argparse.ArgumentParser) -> None:
    c = p.add_argument_group("response cache (off unless asked for; a cached answer is a replay)")
    c.add_argument(
        "--cache",
        nargs="?",
        const="readwrite",
        choices=CACHE_MODES,
        help="replay answers the cache holds and keep new ones; --cache read: replay only; --cache write: "
        "keep only (put it after the job file)",
    )
    add_cache_place_options(c)
    c.add_argument("--cache-ttl", type=duration, metavar="AGE", help="replay answers younger than this (default 14d)")


def add_cache_place_options(c) -> None:
    """`--cache-dir` and `--cache-max-size`: shared by `run`, `resume` and `swarm-tui cache`."""
    c.add_argument(
        "--cache-dir", type=Path, metavar="DIR", help="the cache's directory (default $XDG_CACHE_HOME/swarm-tui)"
    )
    c.add_argument(
        "--cache-max-size", type=byte_size, metavar="SIZE", help="least recently used answers go past it (default 2G)"
    )


def add_provider_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("provider")
    g.add_argument(
        "--provider",
        help="a profile from the config file (built in: sim, openai); several (a,b,c) or a [routes.NAME]: "
        "one swarm over all of them (--route)",
    )
    g.add_argument(
        "--route",
        choices=STRATEGIES,
        help="how calls are spread over several providers: fallback (default: the first healthy one in order), "
        "balance (by each one's headroom: keys whose limits add up), cheapest, fastest (spilling over when full)",
    )
    g.add_argument(
        "--max-price",
        type=positive_float,
        metavar="USD",
        help="never send to a provider above this per 1M output tokens",
    )
    g.add_argument("--base-url", help="an ad hoc OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
    g.add_argument("--model", help="the model to ask for (replaces the model named in each request)")
    g.add_argument("--api-key-env", help="the env var holding the key (default OPENAI_API_KEY)")
    g.add_argument(
        "--backend",
        choices=["aiohttp", "httpx"],
        help="how calls are sent: aiohttp (default): chat calls on swarm-tui's own aiohttp path, with the SDK's "
        "headers and auth, streaming and batches through the SDK on aiohttp; httpx: everything through the "
        "SDK on httpx2. Both take the same proxy, TLS trust, headers and query",
    )
    g.add_argument(
        "--service-tier",
        choices=SERVICE_TIERS,
        help="the tier to ask for (sent as service_tier): flex: at the batch price, slower (a 900 s timeout by "
        "default), sometimes unavailable (retried); priority: faster, at a premium; billed at the tier the answer "
        "says served it",
    )
    g.add_argument("--fallback-base-url", help="a secondary endpoint to fail over to")
    g.add_argument("--fallback-model", help="the model to ask the fallback for (default: the same)")
    g.add_argument("--fallback-api-key-env", help="the env var holding the fallback's key")


def add_engine_options(p: argparse.ArgumentParser) -> None:
    e = p.add_argument_group("engine")
    e.add_argument("--concurrency", type=positive_int, help="in-flight cap (default 50)")
    e.add_argument("--max-attempts", type=positive_int, help="attempts per task, the first included (default 4)")
    e.add_argument(
        "--timeout",
        type=positive_float,
        help="wall-clock limit of one attempt, seconds (default 60); a streamed one: of its wait for the first token",
    )
    e.add_argument(
        "--max-retry-after",
        type=positive_float,
        metavar="S",
        help="honour a provider's Retry-After up to this many seconds (default 60)",
    )
    e.add_argument(
        "--rpm", type=positive_int, help="requests per minute the provider allows (else learned from headers)"
    )
    e.add_argument("--tpm", type=positive_int, help="tokens per minute the provider allows (else learned from headers)")
    e.add_argument(
        "--max-answer-bytes",
        type=positive_int,
        metavar="N",
        help="what one answer may hold (default 8388608, 8 MiB); a larger one fails as answer_too_large",
    )
    e.add_argument("--stream", action="store_true", help="stream answers (time to first token is measured)")
    e.add_argument("--ttft-timeout", type=positive_float, help="streaming: seconds to the first token (default 30)")
    e.add_argument(
        "--idle-timeout", dest="idle_timeout", type=positive_float, metavar="S", help="the old name of --stream-idle"
    )
    e.add_argument(
        "--stream-idle",
        dest="idle_timeout",
        type=positive_float,
        metavar="S",
        help="streaming: the most silence between two chunks before the stream is cut and sent again (default 30); "
        "a stream that keeps sending is never cut, --timeout bounds only its wait for the first token",
    )
    e.add_argument(
        "--on-quota",
        choices=ON_QUOTA,
        help="quota or spend limit spent: wait (suspend, probe, resume by itself; default) or stop "
        "(at once, resumable, exit 75)",
    )
    e.add_argument(
        "--max-suspend",
        type=wait_bound,
        metavar="S|off",
        help="a suspension (quota spent, a Retry-After past --max-retry-after) lasting longer stops the run, "
        "resumable, exit 75 (default 1h; 90, 30m, 12h, off)",
    )
    e.add_argument(
        "--hedge",
        action="store_true",
        help="send a backup earlier: when an attempt runs past p95 x 3 (backups: <= 5%% of requests)",
    )
    e.add_argument(
        "--straggler",
        type=straggler,
        metavar="auto|off|FACTOR",
        help="a call past FACTOR x what it should take at its max_tokens gets a backup and keeps running; the first "
        "answer wins (auto: 3); off: no backup, only --timeout",
    )
    e.add_argument("--no-adaptive", action="store_true", help="keep the in-flight limit fixed (no AIMD)")
    e.add_argument(
        "--budget",
        type=positive_float,
        metavar="USD",
        help="a ceiling: a call goes out only if spent + the worst case of calls in flight + its own stays within it",
    )
    e.add_argument(
        "--fail-on-error", type=share, metavar="RATE", help="stop dispatch when this share of finished tasks failed"
    )
    e.add_argument(
        "--lane",
        choices=LANES,
        help="live calls (default); batch: every task through the provider's Batch API (half price, within 24 h); "
        "auto: a first share live (--live-share), the rest as batches, their failures retried live",
    )
    e.add_argument(
        "--deadline",
        metavar="WHEN",
        help="finish by then (90s, 20m, 2h, or a clock time: 09:00): the autopilot splits the tasks between live "
        "calls and provider batches (lane auto) from what it measures, pulls a late batch back to live, and says "
        "early, with the numbers, when the deadline or the budget cannot hold",
    )
    e.add_argument(
        "--live-share", type=share, metavar="SHARE", help="--lane auto: share of the tasks sent live first (0.02)"
    )
    e.add_argument(
        "--batch-poll",
        type=positive_float,
        metavar="S",
        help="batch lane: seconds before a batch's first poll (default 2; then 1.5x longer each time, up to 60)",
    )
    e.add_argument("--headless", action="store_true", help="no UI: a progress line on stderr")
    e.add_argument(
        "--ray",
        nargs="?",
        const="local",
        metavar="ADDRESS",
        help="run the swarm's engines on Ray actors: a local Ray without ADDRESS, else 'auto' or "
        "ray://host:port (needs swarm-tui[ray])",
    )
    e.add_argument(
        "--ray-actors", type=positive_int, metavar="N", help="with --ray: worker actors (default: one per node)"
    )
    e.add_argument("--theme", help="TUI theme name or a theme file")


def add_judge_options(p: argparse.ArgumentParser) -> None:
    j = p.add_argument_group("judge (LLM-as-a-judge on a sample of the answers)")
    j.add_argument(
        "--judge", metavar="PROFILE|URL", help="judge a sample of the answers with this endpoint ('self': the run's)"
    )
    j.add_argument("--judge-model", help="the judge's model (default: the endpoint's, else the run's)")
    j.add_argument("--judge-rate", type=share, metavar="SHARE", help="share of answers judged (default 0.05)")
    j.add_argument("--judge-rubric", type=Path, metavar="FILE", help="what a good answer is (a text file)")
    j.add_argument(
        "--judge-action",
        choices=ACTIONS,
        help="when the score drifts down (default: flush_memory for a multi-round swarm, else alert)",
    )
    j.add_argument(
        "--judge-drop",
        type=positive_float,
        metavar="POINTS",
        help="allowed fall of the rolling score below its baseline (default 1.5; under 1: a share)",
    )


def add_answer_options(p: argparse.ArgumentParser) -> None:
    a = p.add_argument_group(
        "answers (checked against the body's response_format, the job's [answer], --schema; a refusal or a "
        "filtered answer is never a success)"
    )
    a.add_argument(
        "--schema",
        type=Path,
        metavar="FILE.json",
        help="a JSON Schema every answer's JSON must match (a JSONL job's [answer]; read robustly: fences, prose)",
    )
    a.add_argument(
        "--reasks",
        type=non_negative_int,
        metavar="N",
        help="ask an answer that fails its checks again, with the error, up to N times (default 1)",
    )
    a.add_argument(
        "--on-truncated",
        choices=ON_TRUNCATED,
        help="a checked answer cut at its max_tokens: retry once with twice the room, up to the model's maximum "
        "and within the budget (default); fail; accept it and check it as it is",
    )
    a.add_argument(
        "--escalate",
        metavar="PROFILE",
        help="a task whose answers still cannot be used goes once to this profile's endpoint and model, with the "
        "conversation so far (its attempts' endpoint: escalate:PROFILE)",
    )


def add_sim_options(p: argparse.ArgumentParser) -> None:
    s = p.add_argument_group("embedded simulator (provider sim)")
    s.add_argument("--sim-latency-ms", type=non_negative_float, help="median latency of the simulator")
    s.add_argument("--sim-error-rate", type=share, help="share of requests answered with a 5xx (0-1)")
    s.add_argument("--sim-hang-rate", type=share, help="share of requests that never answer (0-1)")
    s.add_argument("--sim-seed", type=int, help="simulator seed")
    s.add_argument(
        "--sim-drift",
        type=non_negative_int,
        metavar="N",
        help="answers degrade once the swarm's memory holds more than N rounds (context pollution, for --judge)",
    )
    s.add_argument(
        "--sim-schema-break-rate",
        type=share,
        metavar="P",
        help="share of first answers to a JSON request that break its schema: a wrong enum value, a missing field, "
        "prose around the JSON (0-1; to watch the answer checks ask again)",
    )
    s.add_argument(
        "--sim-length-rate", type=share, metavar="P", help="share of first answers cut at their max_tokens (0-1)"
    )
    s.add_argument("--sim-refusal-rate", type=share, metavar="P", help="share of first answers refused (0-1)")
    s.add_argument(
        "--sim-content-filter-rate",
        type=share,
        metavar="P",
        help="share of first answers stopped by a content filter (0-1)",
    )


def add_trace_options(p: argparse.ArgumentParser) -> None:
    t = p.add_argument_group("traces (OpenTelemetry GenAI spans; needs swarm-tui[otel])")
    t.add_argument(
        "--otel",
        action="store_true",
        help="export the run's spans while it goes, OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT (default "
        "http://localhost:4318); a collector that is down costs the run nothing (dropped spans are counted)",
    )
    t.add_argument(
        "--otel-content",
        action="store_true",
        help="with --otel: the prompts, answers and tool arguments and results on the spans too (implies --otel)",
    )


def add_console_options(p: argparse.ArgumentParser, *, logs: bool = True) -> None:
    """How a run speaks to someone not watching: the headless log's format and pace, a bell."""
    g = p.add_argument_group("console and log")
    if logs:
        g.add_argument(
            "--log-format",
            choices=LOG_FORMATS,
            default="text",
            help="headless: text lines, or one JSON object a line for log shippers (default text)",
        )
        g.add_argument(
            "--log-every",
            type=positive_float,
            default=DEFAULT_EVERY_S,
            metavar="S",
            help="headless, stderr not a terminal: a timestamped progress line every S seconds (default 5)",
        )
    g.add_argument(
        "--bell", action="store_true", help="ring the terminal's bell when the run finishes, stops or drifts"
    )


def display_currency(config: Config, code: str | None, rate: float | None, rate_flag: str) -> DisplayCurrency:
    """The display currency `--currency` and a rate flag ask for (`estimate`, `shadow`), else the config's."""
    from swarm_tui.pricing.currency import from_config, resolve_currency

    if code is None and rate is None:
        return from_config(config)
    if code is None and rate is not None:
        code = config.currency
    return resolve_currency(code, rate, source="command line", code_field="--currency", rate_field=rate_flag)
