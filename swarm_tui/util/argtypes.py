"""Argparse value types shared by every command line of the project (`swarm-tui`, its `sim`
subcommand, `python -m swarm_tui.sim`): each parses one flag value or raises
`ArgumentTypeError` saying why, so a bad value is refused by argparse itself (usage line,
exit 2, the flag named) before anything starts. NaN and infinity are never numbers here.
"""

from __future__ import annotations

import argparse
import math
import re


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, not {text!r}")
    return value


def integer(text: str) -> int:
    """Any integer."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def share(text: str) -> float:
    """A share of requests: a number from 0 to 1 (0.05 = 5%)."""
    value = _number(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be a share between 0 and 1 (0.05 = 5%), not {text}")
    return value


def non_negative_float(text: str) -> float:
    """A finite number >= 0 (a duration, a sigma)."""
    value = _number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, not {text}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0."""
    value = _number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, not {text}")
    return value


def non_negative_int(text: str) -> int:
    """An integer >= 0 (for rate limits 0 means unlimited)."""
    value = integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, not {text}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1."""
    value = integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, not {text}")
    return value


def positive_share(text: str) -> float:
    """A share in (0, 1]: 0 would mean "none at all" where some is required (e.g. shadow's --rate)."""
    value = _number(text)
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be a share in (0, 1], e.g. 0.1 for 10%, not {text}")
    return value


STRAGGLER_OFF = "off"


def straggler(text: str) -> float | str:
    """`--straggler auto|off|FACTOR`: 'auto' (the default factor), 'off', or a factor >= 1.5 (a
    call's deadline is FACTOR x what it should take; under 1.5 healthy calls would be cut)."""
    word = text.strip().lower()
    if word in ("auto", STRAGGLER_OFF):
        return word
    value = _number(text)
    if value < 1.5:
        raise argparse.ArgumentTypeError(f"must be auto, off or a factor >= 1.5, not {text}")
    return value


_DURATION_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_SIZE_UNITS = {"k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def wait_bound(text: str) -> float:
    """How long a wait may last: `off` (no bound: inf), or seconds > 0 (`90`, `45s`, `30m`, `12h`, `2d`)."""
    if text.strip().lower() in ("off", "none", "inf"):
        return math.inf
    unit = text[-1:].lower()
    scale = _DURATION_UNITS.get(unit)
    value = _number(text[:-1] if scale is not None else text)
    seconds = value * (scale if scale is not None else 1.0)
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"must be off or a duration above 0 (90, 45s, 30m, 12h), not {text!r}")
    return seconds


def duration(text: str) -> float:
    """A duration > 0 in seconds, from `14d`, `12h`, `30m`, `45s` (a bare number: days)."""
    unit = text[-1:].lower()
    scale = _DURATION_UNITS.get(unit)
    value = _number(text[:-1] if scale is not None else text)
    seconds = value * (scale if scale is not None else _DURATION_UNITS["d"])
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be a duration above 0 (14d, 12h, 30m, 45s), not {text!r}")
    return seconds


def byte_size(text: str) -> int:
    """A size > 0 in bytes, from `2G`, `500M`, `64K` (`MB`, `GiB`... too; a bare number: bytes)."""
    match = re.fullmatch(r"\s*([0-9.eE+-]+)\s*([kKmMgGtT]?)(?:i?[bB])?\s*", text)
    if match is None:
        raise argparse.ArgumentTypeError(f"not a size (2G, 500M, 64K): {text!r}")
    size = int(_number(match.group(1)) * _SIZE_UNITS.get(match.group(2).lower(), 1))
    if size <= 0:
        raise argparse.ArgumentTypeError(f"must be a size above 0 (2G, 500M, 64K), not {text!r}")
    return size
