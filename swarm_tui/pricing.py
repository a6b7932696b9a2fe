"""Prices and the cost of what was billed.

Cost is computed per attempt from normalised usage, so failed-but-billed attempts count:
cached prompt tokens at the cached rate, the rest of the prompt at the input rate, and
completion tokens (reasoning included) at the output rate. A model without a known price
costs `None` ("price unknown"), never $0.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources
from typing import Any

from .providers.usage import Usage

PER_TOKENS = 1_000_000


@dataclass(frozen=True, slots=True)
class Price:
    input: float
    cached_input: float
    output: float
    source: str = ""

    def cost(self, usage: Usage) -> float:
        uncached = max(0, usage.prompt - usage.cached)
        return (uncached * self.input + usage.cached * self.cached_input + usage.completion * self.output) / PER_TOKENS


class PriceTable:
    def __init__(self, entries: dict[str, Price]) -> None:
        self._entries = entries

    @classmethod
    def builtin(cls, overrides: dict[str, Any] | None = None) -> "PriceTable":
        doc = tomllib.loads(resources.files(__package__).joinpath("prices.toml").read_text(encoding="utf-8"))
        doc.pop("meta", None)
        doc.update(overrides or {})
        entries = {}
        for key, row in doc.items():
            entries[key.lower()] = Price(
                input=float(row["input"]), cached_input=float(row.get("cached_input", row["input"])),
                output=float(row["output"]), source=str(row.get("source", "")),
            )
        return cls(entries)

    def lookup(self, model: str | None, provider: str = "*") -> Price | None:
        if not model:
            return None
        model = model.lower()
        return self._entries.get(f"{provider.lower()}/{model}") or self._entries.get(f"*/{model}")

    def models(self) -> list[str]:
        return sorted({key.split("/", 1)[1] for key in self._entries})
