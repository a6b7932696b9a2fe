"""Fixed-width formatting of the figures the TUI shows. Pure functions, no Textual.

Every formatter returns a string of a known maximum width for any input, so that a field
never grows or shrinks as its value changes (no layout jitter in the footer).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from swarm_tui.pricing.currency import DisplayCurrency
from swarm_tui.util.json_repair import JsonExtractionError, json_answer


def si(n: float | int | None, width: int = 5) -> str:
    """A count in at most `width` (>= 5) characters, right-aligned: 999, 1.2k, 12.3k, 123k, 1.2M."""
    if n is None:
        return "-".rjust(width)
    n = float(n)
    for limit, div, suffix in ((1e3, 1, ""), (1e6, 1e3, "k"), (1e9, 1e6, "M"), (float("inf"), 1e9, "G")):
        if abs(n) < limit:
            value = n / div
            if suffix and abs(value) < 100:
                text = f"{value:.1f}{suffix}"
            else:
                text = f"{value:.0f}{suffix}"
            if len(text) > width and suffix:
                text = f"{value:.0f}{suffix}"
            return text.rjust(width)
    return "huge".rjust(width)  # pragma: no cover


def ms(value: float | None, width: int = 6) -> str:
    """Milliseconds, switching to seconds above 10 s: `   412`, ` 12.3s`."""
    return _milliseconds(value, width, unit="", minutes_from=1_000_000)


def latency(value: float | None, width: int = 6) -> str:
    """A latency with its unit, so it reads right at any size: `  412ms`, ` 11.0s`, `   12m`."""
    return _milliseconds(value, width, unit="ms", minutes_from=600_000)


def _milliseconds(value: float | None, width: int, *, unit: str, minutes_from: float) -> str:
    if value is None:
        return "-".rjust(width)
    if value < 10_000:
        return f"{value:.0f}{unit}".rjust(width)
    if value < minutes_from:
        return f"{value / 1000:.1f}s".rjust(width)
    return f"{value / 60_000:.0f}m".rjust(width)


def duration(seconds: float | None) -> str:
    """`mm:ss`, or `h:mm:ss` past an hour; `--:--` when unknown. At most 8 characters for a day."""
    if seconds is None:
        return "--:--"
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    if hours >= 100:
        return f"{hours // 24}d{hours % 24:02d}h"
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60:02d}:{rest % 60:02d}"


def span(seconds: float) -> str:
    """A coarse span of time for hours-long waits: `45s`, `12m`, `3h05m`, `2d04h`."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 48:
        return f"{hours}h{minutes % 60:02d}m"
    return f"{hours // 24}d{hours % 24:02d}h"


def short_batch_id(batch_id: str, keep: int = 8) -> str:
    """A provider batch id, short: its end (OpenAI's begin with a timestamp, so two batches
    created together share their first characters): `batch_…3f9c2b07`."""
    prefix, _, rest = batch_id.rpartition("_") if "_" in batch_id else ("", "", batch_id)
    if len(rest) <= keep + 1:
        return batch_id
    return f"{prefix}_…{rest[-keep:]}" if prefix else f"…{rest[-keep:]}"


def rate(value: float, width: int = 6) -> str:
    """A per-second rate: ` 412.3`, `  1.2k`."""
    if value < 1000:
        return f"{value:.1f}".rjust(width)
    return si(value, width)


def usd(value: float, width: int = 9) -> str:
    if value < 10:
        text = f"${value:.4f}"
    elif value < 10_000:
        text = f"${value:.2f}"
    else:
        text = f"${si(value, 5).strip()}"
    return text.ljust(width)


def money(value: float, currency: DisplayCurrency, width: int = 10) -> str:
    """The cost in the display currency (`≈¥0.19`), blank when it is USD or the rate is unknown."""
    amount = currency.amount(value)
    if amount is None or not currency.shows_local:
        return "".ljust(width)
    text = f"{amount:.2f}" if amount < 10_000 else si(amount, 5).strip()
    return f"≈{currency.symbol}{text}".ljust(width)


def clock_time(epoch: float) -> str:
    """Local wall-clock time of an epoch timestamp, `HH:MM:SS`."""
    return time.strftime("%H:%M:%S", time.localtime(epoch))


def pretty_json(text: str) -> str | None:
    """`text` pretty-printed when it is JSON (also inside a ``` fence, or with a truncated ending
    that `extract_json` repairs); None when it is prose, even prose with a bracket in it."""
    try:
        return json.dumps(json_answer(text), indent=2, ensure_ascii=False)
    except JsonExtractionError:
        return None


def one_line(text: str, limit: int = 300) -> str:
    """Provider text on one line (newlines shown as ⏎), cut at `limit` characters."""
    flat = " ⏎ ".join(part.strip() for part in text.splitlines() if part.strip()) if "\n" in text else text
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def short_path(path: Path) -> str:
    """A path as short as it stays unambiguous: `~/...` under the home directory, `./...` under
    the working directory, else absolute."""
    path = Path(os.path.abspath(path))
    for base, prefix in ((Path.home, "~"), (Path.cwd, ".")):
        try:
            return f"{prefix}/{path.relative_to(base())}"
        except (ValueError, OSError, RuntimeError):  # not under it; no home; a removed directory
            continue
    return str(path)
