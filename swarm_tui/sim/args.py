"""Command-line flags of the simulator, shared by ``python -m swarm_tui.sim`` and
``swarm-tui sim`` (the main CLI calls ``add_arguments`` on its ``sim`` subparser and
``config_from_args`` on the result), and used in reverse (``config_to_argv``) to start a
simulator in a child process with a given ``SimConfig``.

Every flag defaults to None so that only what the user typed patches ``SimConfig()``'s
defaults; the defaults therefore live in one place, the dataclass.

The required key can also come from ``$SWARM_TUI_SIM_REQUIRE_KEY``, which is how process
mode passes it, so it never shows in the process list.

Each flag's ``type`` checks its range, so a bad value is refused by argparse itself (usage
line, exit 2, the flag named) before anything starts. The generic ones (``share``,
``non_negative_float``, ``positive_float``, ``non_negative_int``, ``positive_int``) live in
``swarm_tui.util.argtypes`` with the main CLI's and are re-exported here; ``port_number``,
``token_range``, ``round_range`` and ``model_list`` are the simulator's own.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

from swarm_tui.sim.config import SimConfig
from swarm_tui.util.argtypes import integer, non_negative_float, non_negative_int, positive_float, positive_int, share

__all__ = [
    "add_arguments",
    "SIM_DESCRIPTION",
    "SIM_EPILOG",
    "config_from_args",
    "config_to_argv",
    "DEFAULT_PORT",
    "REQUIRE_KEY_ENV",
    "share",
    "non_negative_float",
    "positive_float",
    "non_negative_int",
    "positive_int",
    "port_number",
    "token_range",
    "round_range",
    "model_list",
]

DEFAULT_PORT = 8790
REQUIRE_KEY_ENV = "SWARM_TUI_SIM_REQUIRE_KEY"

SIM_DESCRIPTION = """\
Serve the OpenAI-compatible simulator in the foreground (the provider `sim` that runs use by
default, here on a port of its own): chat completions, plain and streamed, the Batch and Files
APIs, 429s with Retry-After past --rpm/--tpm, 5xx, hangs, cached tokens; seeded. For your own
tools, or as a --base-url endpoint: it answers any model name, and any key unless --require-key.
"""

SIM_EPILOG = """\
examples:
  swarm-tui sim --port 8790 --rpm 600 --error-rate 0.02             then, in another terminal:
  swarm-tui run job.jsonl --base-url http://127.0.0.1:8790/v1 --model sim-1 --headless
  swarm-tui sim --port 8801 --latency-ms 118 --seed 1     an endpoint for `swarm-tui shadow`
  swarm-tui sim --batch-seconds 20 --batch-error-rate 0.05     the Batch API, slower
"""

# -- argparse types: each parses one flag value or raises ArgumentTypeError saying why ---------


def port_number(text: str) -> int:
    """A TCP port, 0 for any free one."""
    value = integer(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port from 0 to 65535, not {text}")
    return value


def token_range(text: str) -> str:
    """``MIN:MAX`` token counts with 1 <= MIN <= MAX (kept as text: ``SimConfig`` parses it)."""
    parts = text.replace(",", ":").split(":")
    try:
        low, high = (int(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be MIN:MAX token counts, e.g. 16:120, not {text!r}") from None
    if not 1 <= low <= high:
        raise argparse.ArgumentTypeError(f"must be MIN:MAX with 1 <= MIN <= MAX, not {text!r}")
    return f"{low}:{high}"


def round_range(text: str) -> str:
    """``MIN:MAX`` tool rounds with 0 <= MIN <= MAX (kept as text: ``SimConfig`` parses it)."""
    parts = text.replace(",", ":").split(":")
    try:
        low, high = (int(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be MIN:MAX tool rounds, e.g. 1:4, not {text!r}") from None
    if not 0 <= low <= high:
        raise argparse.ArgumentTypeError(f"must be MIN:MAX with 0 <= MIN <= MAX, not {text!r}")
    return f"{low}:{high}"


def model_list(text: str) -> str:
    """Comma-separated model ids, at least one."""
    if not any(m.strip() for m in text.split(",")):
        raise argparse.ArgumentTypeError("must name at least one model id (A,B)")
    return text


class _FaultShare(argparse.Action):
    """``--error-rate`` and ``--hang-rate``: each a share, and together at most 1 (a request is
    either answered with a 5xx, hung, or served). Checked by whichever of the two comes last."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, values)
        error = getattr(namespace, "sim_error_rate", None)
        hang = getattr(namespace, "sim_hang_rate", None)
        if error is not None and hang is not None and error + hang > 1.0:
            raise argparse.ArgumentError(
                self,
                f"--error-rate {error:g} and --hang-rate {hang:g} add up to "
                f"{error + hang:g}; together they must not exceed 1",
            )


# (flag, SimConfig field, type, metavar, help)
_FLAGS: list[tuple[str, str, Callable[[str], Any], str, str]] = [
    (
        "--latency-ms",
        "latency_ms",
        non_negative_float,
        "MS",
        "median latency (time to first token), lognormal; 0 answers at once (default 40)",
    ),
    ("--latency-sigma", "latency_sigma", non_negative_float, "S", "sigma of the lognormal latency (default 0.5)"),
    ("--rpm", "rpm", non_negative_int, "N", "requests per minute before 429s (default: unlimited; 0 = unlimited)"),
    (
        "--tpm",
        "tpm",
        non_negative_int,
        "N",
        "tokens per minute (prompt + max_tokens) before 429s (default: unlimited; 0 = unlimited)",
    ),
    ("--burst-s", "burst_s", positive_float, "S", "seconds of traffic a rate-limit bucket holds (default 1)"),
    ("--error-rate", "error_rate", share, "P", "share of requests answered 500/502/503 (default 0)"),
    ("--hang-rate", "hang_rate", share, "P", "share of requests that never answer (default 0)"),
    ("--hang-s", "hang_s", non_negative_float, "S", "how long a hung request hangs before a 504 (default 600)"),
    (
        "--stream-stall-rate",
        "stream_stall_rate",
        share,
        "P",
        "share of streams that stall after a few chunks (default 0)",
    ),
    (
        "--slow-rate",
        "slow_rate",
        share,
        "P",
        "share of request bodies answered --slow-factor times slower, every time they are sent (default 0)",
    ),
    ("--slow-factor", "slow_factor", positive_float, "X", "how much slower a slow body's answer is (default 200)"),
    (
        "--quota-at",
        "quota_at_s",
        non_negative_float,
        "S",
        "S seconds after the start, the quota runs out: every request is answered 429 insufficient_quota "
        "for --quota-for seconds (default: never)",
    ),
    ("--quota-for", "quota_for_s", non_negative_float, "S", "how long the quota window lasts (default 10)"),
    ("--seed", "seed", int, "N", "seed of every random decision (default 0)"),
    (
        "--context-window",
        "context_window",
        positive_int,
        "N",
        "prompt + max_tokens above this answer 400 context_length_exceeded (default 131072)",
    ),
    (
        "--cache-min-tokens",
        "cache_min_tokens",
        non_negative_int,
        "N",
        "shortest repeated prefix reported as cached_tokens (default 128)",
    ),
    ("--output-tokens", "output_tokens", token_range, "MIN:MAX", "answer length range in tokens (default 16:120)"),
    ("--chunk-delay-ms", "chunk_delay_ms", non_negative_float, "MS", "delay between streamed chunks (default 0)"),
    (
        "--tokens-per-s",
        "tokens_per_s",
        positive_float,
        "N",
        "answers are written at N tokens/s after the first token, so long answers take longer (default: at once)",
    ),
    (
        "--require-key",
        "require_key",
        str,
        "KEY",
        f"answer 401 unless 'Authorization: Bearer KEY' (or set ${REQUIRE_KEY_ENV})",
    ),
    ("--models", "models", model_list, "A,B", "model ids listed by /v1/models (default sim-1)"),
    (
        "--tool-rounds",
        "tool_rounds",
        round_range,
        "MIN:MAX",
        "tool rounds a task takes before answering when offered tools, unless [[sim:tools=N]] says (default 1:4)",
    ),
    (
        "--flex-latency-factor",
        "flex_latency_factor",
        positive_float,
        "X",
        "service_tier flex: answers take X times the latency (default 4)",
    ),
    (
        "--priority-latency-factor",
        "priority_latency_factor",
        positive_float,
        "X",
        "service_tier priority: answers take X times the latency (default 0.5)",
    ),
    (
        "--flex-unavailable-rate",
        "flex_unavailable_rate",
        share,
        "P",
        'service_tier flex: share of requests answered 429 "resource unavailable" (default 0.05)',
    ),
    ("--refusal-rate", "refusal_rate", share, "P", "share of answers that are refusals (message.refusal; default 0)"),
    (
        "--content-filter-rate",
        "content_filter_rate",
        share,
        "P",
        "share of answers stopped by the content filter (finish_reason content_filter; default 0)",
    ),
    ("--length-rate", "length_rate", share, "P", "share of answers cut short (finish_reason length; default 0)"),
    (
        "--schema-break-rate",
        "schema_break_rate",
        share,
        "P",
        "share of JSON answers that break the schema asked for: wrong enum, missing field, prose around it; a "
        "re-ask that names the error is answered well (default 0)",
    ),
    (
        "--strong-models",
        "strong_models",
        model_list,
        "A,B",
        "models that always answer well, whatever the rates above (a stronger model to escalate to)",
    ),
    (
        "--batch-seconds",
        "batch_seconds",
        non_negative_float,
        "S",
        "Batch API: seconds a batch takes from created to completed, OpenAI's hours compressed (default 3)",
    ),
    (
        "--batch-error-rate",
        "batch_error_rate",
        share,
        "P",
        "Batch API: share of batch lines that fail with a 500, on top of the chat faults (default 0)",
    ),
    (
        "--batch-expire-after",
        "batch_expire_after",
        share,
        "P",
        "Batch API: every batch runs only this share of its lines, then ends expired (default: never)",
    ),
    (
        "--drift-after-rounds",
        "drift_after_rounds",
        non_negative_int,
        "N",
        "context pollution: answers degrade about 2 quality points per remembered round past N "
        "and recover when the memory is flushed (default: no drift)",
    ),
    (
        "--judge-prose-first",
        "judge_prose_first",
        non_negative_int,
        "N",
        "the first N judge verdicts are prose, not JSON, to exercise a JSON re-ask (default 0)",
    ),
]


def add_arguments(parser: argparse.ArgumentParser, *, host_port: bool = True) -> None:
    """Add the simulator's flags to ``parser`` (``--host``/``--port`` unless told not to)."""
    if host_port:
        parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
        parser.add_argument(
            "--port",
            type=port_number,
            default=DEFAULT_PORT,
            help=f"port to listen on, 0 for any free one (default {DEFAULT_PORT})",
        )
    for flag, dest, typ, metavar, help_ in _FLAGS:
        action = _FaultShare if dest in ("error_rate", "hang_rate") else "store"
        parser.add_argument(
            flag, dest=f"sim_{dest}", type=typ, default=None, metavar=metavar, help=help_, action=action
        )
    parser.add_argument(
        "--down",
        dest="sim_down",
        action="store_true",
        default=None,
        help="answer every chat request 503 (an endpoint that is down)",
    )
    parser.add_argument(
        "--no-rate-headers",
        dest="sim_rate_headers",
        action="store_false",
        default=None,
        help="send no x-ratelimit-* headers (the limit is found from 429s alone)",
    )
    parser.add_argument(
        "--rate-headers-on-429-only",
        dest="sim_rate_headers_on_success",
        action="store_false",
        default=None,
        help="send the x-ratelimit-* headers on 429s only, never on a success (many relays)",
    )
    parser.add_argument(
        "--reasoning",
        dest="sim_reasoning",
        action="store_true",
        default=None,
        help="every answer carries reasoning_content first, as Kimi and DeepSeek send "
        "(else only a task with [[sim:reasoning]])",
    )
    parser.add_argument(
        "--only-listed-models",
        dest="sim_only_listed_models",
        action="store_true",
        default=None,
        help="answer 404 model_not_found to a chat request naming a model not in --models (a provider that "
        "does not serve it); else any model name is accepted",
    )
    parser.add_argument(
        "--limit-zero",
        dest="sim_limit_zero",
        action="store_true",
        default=None,
        help="answer every chat request 429 stating a limit of 0 (x-ratelimit-limit-requests: 0): a key "
        "with no allowance for the model",
    )
    parser.add_argument(
        "--quiet", dest="sim_quiet", action="store_true", default=False, help="print only the listening line"
    )


def config_from_args(ns: argparse.Namespace, base: SimConfig | None = None) -> SimConfig:
    """The ``SimConfig`` the flags describe (ValueError naming the field when invalid)."""
    patch: dict[str, Any] = {}
    for _, dest, *_ in _FLAGS:
        value = getattr(ns, f"sim_{dest}", None)
        if value is not None:
            patch[dest] = value
    if getattr(ns, "sim_down", None):
        patch["down"] = True
    if getattr(ns, "sim_rate_headers", None) is False:
        patch["rate_headers"] = False
    if getattr(ns, "sim_rate_headers_on_success", None) is False:
        patch["rate_headers_on_success"] = False
    if getattr(ns, "sim_reasoning", None):
        patch["reasoning"] = True
    if getattr(ns, "sim_only_listed_models", None):
        patch["only_listed_models"] = True
    if getattr(ns, "sim_limit_zero", None):
        patch["limit_zero"] = True
    if "require_key" not in patch and os.environ.get(REQUIRE_KEY_ENV):
        patch["require_key"] = os.environ[REQUIRE_KEY_ENV]
    return (base or SimConfig()).patched(patch)


def config_to_argv(cfg: SimConfig) -> list[str]:
    """Flags reproducing ``cfg`` (except ``require_key``, which goes by environment)."""
    default = SimConfig()
    argv: list[str] = []
    for flag, dest, *_ in _FLAGS:
        if dest == "require_key":
            continue
        value = getattr(cfg, dest)
        if value == getattr(default, dest):
            continue
        if dest in ("output_tokens", "tool_rounds"):
            value = f"{value[0]}:{value[1]}"
        elif dest in ("models", "strong_models"):
            value = ",".join(value)
        elif value is None:
            value = 0  # rpm/tpm: 0 means unlimited
        argv += [flag, repr(value) if isinstance(value, float) else str(value)]
    if cfg.down:
        argv.append("--down")
    if not cfg.rate_headers:
        argv.append("--no-rate-headers")
    if not cfg.rate_headers_on_success:
        argv.append("--rate-headers-on-429-only")
    if cfg.reasoning:
        argv.append("--reasoning")
    if cfg.only_listed_models:
        argv.append("--only-listed-models")
    if cfg.limit_zero:
        argv.append("--limit-zero")
    return argv
