"""What makes two requests the same for the cache: the endpoint's identity and the fields of the
body that change the answer.

The key is the SHA-256 of canonical JSON (sorted keys, no spaces, UTF-8) of the base URL, the
model and the body without the fields that only change how an answer is delivered or who is
billed for it (`stream`, `stream_options`, `user`, `metadata`, `store`, `service_tier`). Every
other field counts — messages, tools, temperature, seed, max_tokens, response_format, and any a
provider adds — so a field we do not know of can only make a miss, never a wrong hit. The API
key is never part of it: two keys of one account share their answers.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

IGNORED_FIELDS = frozenset({"stream", "stream_options", "user", "metadata", "store", "service_tier"})
"""Body fields that do not change the answer (how it is delivered, who asked, how it is stored)."""


def request_key(base_url: str, model: str | None, body: dict[str, Any]) -> str:
    """The cache key of `body` sent to `base_url` for `model` (the body's own model wins)."""
    kept = {name: value for name, value in body.items() if name not in IGNORED_FIELDS}
    identity = {"base_url": base_url.rstrip("/"), "model": kept.pop("model", None) or model, "body": kept}
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
