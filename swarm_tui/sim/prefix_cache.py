"""The prefix cache: which message prefixes were processed before, as ``cached_tokens``.

``PrefixCache``: keyed by hashes of the request's message prefixes (every message but the last,
cut at each message boundary). The longest prefix seen before that is at least
``cache_min_tokens`` long gives ``cached_tokens``: its token count rounded down to a multiple of
64. A prefix enters the cache when a request carrying it is admitted (past auth, validation,
scripted faults and rate limits). Which of several concurrent requests misses is, as with a real
cache, a matter of arrival order; every other decision is not.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from swarm_tui.sim.tokens import message_tokens

__all__ = ["PrefixCache"]


class PrefixCache:
    """Which message prefixes were processed before; reports ``cached_tokens``."""

    def __init__(self, min_tokens: int = 128, max_entries: int = 100_000) -> None:
        self.min_tokens = min_tokens
        self._seen: OrderedDict[bytes, None] = OrderedDict()
        self._max = max_entries

    def observe(self, messages: Sequence[Any]) -> int:
        """Record this request's prefixes; return its cached tokens (0 on a miss).

        Like a provider's cache, the longest prefix seen before counts, at message boundaries:
        a shared context sent first hits even when a later, per-agent message differs.
        """
        if len(messages) < 2:
            return 0
        seen = self._seen
        hasher = hashlib.sha256()
        tokens = 0
        cached = 0
        for message in messages[:-1]:
            hasher.update(
                json.dumps(message, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
            )
            tokens += message_tokens(message)
            h = hasher.copy().digest()
            if h in seen:
                seen.move_to_end(h)
                if tokens >= self.min_tokens and tokens >= 64:
                    cached = tokens - tokens % 64
            else:
                seen[h] = None
                if len(seen) > self._max:
                    seen.popitem(last=False)
        return cached

    def clear(self) -> None:
        self._seen.clear()
