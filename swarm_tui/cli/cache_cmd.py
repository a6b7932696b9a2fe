"""`swarm-tui cache stats | clear | prune`: what the response cache holds, and making room."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from swarm_tui.cli.help import HELP_FORMAT
from swarm_tui.cli.options import add_cache_place_options
from swarm_tui.run.exit_codes import EXIT_OK
from swarm_tui.util.argtypes import duration

CACHE_EPILOG = """\
The cache is one SQLite file, DIR/responses.sqlite3 (DIR: --cache-dir, else
$XDG_CACHE_HOME/swarm-tui, else ~/.cache/swarm-tui). A run uses it only with --cache.

examples:
  swarm-tui run job.jsonl --cache          replay what the cache holds, keep new answers
  swarm-tui cache stats                    entries, size, hit rate, oldest, per model
  swarm-tui cache prune --cache-ttl 7d --cache-max-size 500M
  swarm-tui cache clear --cache-dir ./cache
"""


def add_parser(commands) -> None:
    cache = commands.add_parser(
        "cache",
        help="the response cache: stats, clear, prune",
        description="The response cache that --cache runs replay from: its entries, size, hit rate, oldest entry\n"
        "and entries per model (stats); remove everything (clear); remove expired entries and the\n"
        "least recently used past the size bound (prune).\n",
        epilog=CACHE_EPILOG,
        formatter_class=HELP_FORMAT,
    )
    cache.add_argument(
        "action",
        choices=("stats", "clear", "prune"),
        help="stats: what the cache holds; clear: remove every answer; prune: expired and least recently used out",
    )
    add_cache_place_options(cache)
    cache.add_argument("--cache-ttl", type=duration, metavar="AGE", help="prune: entries older than this go (14d)")
    cache.add_argument("--json", action="store_true", help="stats as JSON")
    cache.set_defaults(handler=cmd_cache)


def cmd_cache(args: argparse.Namespace) -> int:
    from swarm_tui.cache import CacheMode, ResponseCache, default_cache_dir
    from swarm_tui.cache.store import DEFAULT_MAX_BYTES, DEFAULT_TTL_S
    from swarm_tui.core.errors import InputError

    directory: Path = args.cache_dir or default_cache_dir()
    if args.action == "stats" and not (directory / "responses.sqlite3").exists():
        print(f"no response cache in {directory}")
        return EXIT_OK
    problems: list[str] = []
    store = ResponseCache(
        directory,
        CacheMode.READ_WRITE,
        ttl_s=args.cache_ttl or DEFAULT_TTL_S,
        max_bytes=args.cache_max_size or DEFAULT_MAX_BYTES,
        on_problem=problems.append,
    )
    if problems:
        raise InputError.single(store.path, "cache", f"{problems[0]}; remove the file to start an empty cache")
    try:
        if args.action == "clear":
            print(f"removed {store.clear():,} cached answers from {store.path}")
        elif args.action == "prune":
            expired, evicted = store.prune()
            print(f"removed {expired:,} expired and {evicted:,} least recently used answers from {store.path}")
        else:
            stats = store.stats()
            print(json.dumps(stats, indent=2) if args.json else _stats_text(stats))
    finally:
        store.close()
    return EXIT_OK


def _stats_text(stats: dict) -> str:
    oldest = stats["oldest_at"]
    age = f"{(time.time() - oldest) / 86400:.1f} days old" if oldest is not None else "none"
    rate = f"{stats['hit_rate']:.1%}" if stats["hit_rate"] is not None else "no lookups yet"
    lines = [
        f"cache     {stats['path']}",
        f"entries   {stats['entries']:,} ({stats['bytes'] / 1024**2:.1f} MiB of answers, "
        f"{stats['file_bytes'] / 1024**2:.1f} MiB on disk; {stats['expired']:,} expired)",
        f"hit rate  {rate} ({stats['hits']:,} of {stats['lookups']:,} lookups)",
        f"oldest    {age}",
    ]
    for model in stats["models"]:
        lines.append(f"  {model['model'] or '?'}: {model['entries']:,} answers, {model['bytes'] / 1024:.0f} KiB")
    return "\n".join(lines)
