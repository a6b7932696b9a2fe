"""The response cache shared by every run, lane and process (`--cache`): validated answers kept
by what was asked of which endpoint, so that a run pays once for an answer across runs.

`key` says what makes two requests the same; `store` is the SQLite file several processes share.
Neither imports the engine, the journal or Textual: the engine's cache lane (`engine/lanes/cache.py`)
and the CLI's `cache` command use them.
"""

from __future__ import annotations

from swarm_tui.cache.key import request_key
from swarm_tui.cache.store import CacheEntry, CacheMode, CacheSettings, ResponseCache, default_cache_dir

__all__ = ["CacheEntry", "CacheMode", "CacheSettings", "ResponseCache", "default_cache_dir", "request_key"]
