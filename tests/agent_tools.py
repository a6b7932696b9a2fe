"""Python functions the agent tests offer as tools (`tests.agent_tools:NAME`)."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from typing import Literal


def lookup(term: str, limit: int = 3) -> str:
    """Look a term up in a tiny glossary.

    The rest of this docstring is not the tool's description."""
    return f"lookup({term}): {term} means what the agent asked about (limit {limit})"


def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


async def pick(colour: Literal["red", "green"], tags: list[str] | None = None) -> dict:
    """Pick a colour (async)."""
    await asyncio.sleep(0)
    return {"colour": colour, "tags": tags or []}


def broken(x: int) -> str:
    """Always fails."""
    raise ValueError(f"cannot handle {x}")


def slow(seconds: float) -> str:
    """Sleeps."""
    time.sleep(seconds)
    return "slept"


def nap(seconds: float) -> str:
    """Sleeps a little (at most 0.3 s, whatever the model asks)."""
    time.sleep(min(abs(seconds) * 0.05, 0.3))
    return f"napped {seconds}"


QUICK_CALLS: list[str] = []
"""Every call of `quick`, in order (a test clears it)."""
GATE = threading.Event()
"""`gate` blocks until a test sets this (a test clears it)."""
GATE_CALLS: list[str] = []
"""Every call of `gate`, as it began."""


async def quick(text: str) -> str:
    """Answer at once (async, awaiting nothing: done in the first step of its call)."""
    QUICK_CALLS.append(text)
    return f"quick({text})"


def gate(text: str) -> str:
    """Wait until the test opens the gate."""
    GATE_CALLS.append(text)
    GATE.wait(30)
    return f"gate({text})"


def reveal(what: str = "key") -> str:
    """Read the test's key back from the environment, in the spellings a tool may print it."""
    from urllib.parse import quote

    key = os.environ.get("RELAY_KEY", "")
    return f"the key is {key}, {quote(key)} or {key.upper()} ({what})"
