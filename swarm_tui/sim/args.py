"""Command-line flags of the simulator, shared by ``python -m swarm_tui.sim`` and
``swarm-tui sim`` (the main CLI calls ``add_arguments`` on its ``sim`` subparser and
``config_from_args`` on the result), and used in reverse (``config_to_argv``) to start a
simulator in a child process with a given ``SimConfig``.

Every flag defaults to None so that only what the user typed patches ``SimConfig()``'s
defaults; the defaults therefore live in one place, the dataclass.

The required key can also come from ``$SWARM_TUI_SIM_REQUIRE_KEY``, which is how process
mode passes it, so it never shows in the process list.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from .config import SimConfig

__all__ = ["add_arguments", "config_from_args", "config_to_argv", "DEFAULT_PORT",
           "REQUIRE_KEY_ENV"]

DEFAULT_PORT = 8790
REQUIRE_KEY_ENV = "SWARM_TUI_SIM_REQUIRE_KEY"

# (flag, SimConfig field, type, metavar, help)
_FLAGS: list[tuple[str, str, Any, str, str]] = [
    ("--latency-ms", "latency_ms", float, "MS",
     "median latency (time to first token), lognormal; 0 answers at once (default 40)"),
    ("--latency-sigma", "latency_sigma", float, "S", "sigma of the lognormal latency (default 0.5)"),
    ("--rpm", "rpm", int, "N", "requests per minute before 429s (default: unlimited; 0 = unlimited)"),
    ("--tpm", "tpm", int, "N",
     "tokens per minute (prompt + max_tokens) before 429s (default: unlimited; 0 = unlimited)"),
    ("--burst-s", "burst_s", float, "S", "seconds of traffic a rate-limit bucket holds (default 1)"),
    ("--error-rate", "error_rate", float, "P", "share of requests answered 500/502/503 (default 0)"),
    ("--hang-rate", "hang_rate", float, "P", "share of requests that never answer (default 0)"),
    ("--hang-s", "hang_s", float, "S", "how long a hung request hangs before a 504 (default 600)"),
    ("--stream-stall-rate", "stream_stall_rate", float, "P",
     "share of streams that stall after a few chunks (default 0)"),
    ("--seed", "seed", int, "N", "seed of every random decision (default 0)"),
    ("--context-window", "context_window", int, "N",
     "prompt + max_tokens above this answer 400 context_length_exceeded (default 131072)"),
    ("--cache-min-tokens", "cache_min_tokens", int, "N",
     "shortest repeated prefix reported as cached_tokens (default 128)"),
    ("--output-tokens", "output_tokens", str, "MIN:MAX", "answer length range in tokens (default 16:120)"),
    ("--chunk-delay-ms", "chunk_delay_ms", float, "MS", "delay between streamed chunks (default 0)"),
    ("--require-key", "require_key", str, "KEY",
     f"answer 401 unless 'Authorization: Bearer KEY' (or set ${REQUIRE_KEY_ENV})"),
    ("--models", "models", str, "A,B", "model ids listed by /v1/models (default sim-1)"),
]


def add_arguments(parser: argparse.ArgumentParser, *, host_port: bool = True) -> None:
    """Add the simulator's flags to ``parser`` (``--host``/``--port`` unless told not to)."""
    if host_port:
        parser.add_argument("--host", default="127.0.0.1",
                            help="address to listen on (default 127.0.0.1)")
        parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                            help=f"port to listen on, 0 for any free one (default {DEFAULT_PORT})")
    for flag, dest, typ, metavar, help_ in _FLAGS:
        parser.add_argument(flag, dest=f"sim_{dest}", type=typ, default=None, metavar=metavar,
                            help=help_)
    parser.add_argument("--down", dest="sim_down", action="store_true", default=None,
                        help="answer every chat request 503 (an endpoint that is down)")
    parser.add_argument("--quiet", dest="sim_quiet", action="store_true", default=False,
                        help="print only the listening line")


def config_from_args(ns: argparse.Namespace, base: SimConfig | None = None) -> SimConfig:
    """The ``SimConfig`` the flags describe (ValueError naming the field when invalid)."""
    patch: dict[str, Any] = {}
    for _, dest, *_ in _FLAGS:
        value = getattr(ns, f"sim_{dest}", None)
        if value is not None:
            patch[dest] = value
    if getattr(ns, "sim_down", None):
        patch["down"] = True
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
        if dest == "output_tokens":
            value = f"{value[0]}:{value[1]}"
        elif dest == "models":
            value = ",".join(value)
        elif value is None:
            value = 0  # rpm/tpm: 0 means unlimited
        argv += [flag, repr(value) if isinstance(value, float) else str(value)]
    if cfg.down:
        argv.append("--down")
    return argv
