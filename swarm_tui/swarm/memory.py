"""Rolling memory: what later rounds of a swarm know of the earlier ones.

A window of the last N rounds' summaries (the article's `deque(maxlen=5)`), rendered as one
system message, and trimmed — oldest first, then the oldest kept one cut — to a token budget so
the request never passes the model's context length (the article's error 2).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

MEMORY_HEADER = "Memory of the swarm's previous rounds"
"""How the memory message starts: the engine's trimmer finds it by this."""


def estimate_tokens(text: str) -> int:
    """About 4 bytes of UTF-8 a token: a budget, not a bill."""
    return len(text.encode("utf-8")) // 4 + 1


@dataclass(frozen=True)
class RoundSummary:
    round: int
    text: str


class RollingMemory:
    def __init__(self, window: int = 5) -> None:
        self.window = window
        self._rounds: deque[RoundSummary] = deque(maxlen=window)

    def add(self, round_number: int, summary: str) -> None:
        self._rounds.append(RoundSummary(round_number, summary))

    def flush(self) -> int:
        """Forget everything (the article's "flush the KV cache" when quality drops)."""
        count = len(self._rounds)
        self._rounds.clear()
        return count

    def __len__(self) -> int:
        return len(self._rounds)

    def summaries(self) -> list[RoundSummary]:
        return list(self._rounds)

    def render(self, budget_tokens: int) -> str:
        """The memory as one message of at most `budget_tokens` (empty when there is none)."""
        if not self._rounds or budget_tokens <= 0:
            return ""
        header = f"{MEMORY_HEADER} (most recent last):"
        parts = [f"Round {s.round}: {s.text.strip()}" for s in self._rounds]
        while parts:
            text = "\n\n".join([header, *parts])
            if estimate_tokens(text) <= budget_tokens:
                return text
            if len(parts) > 1:
                parts.pop(0)
            else:
                room = max(0, (budget_tokens - estimate_tokens(header) - 8) * 4)
                parts[0] = parts[0].encode("utf-8")[:room].decode("utf-8", "ignore") + " …"
                if room == 0:
                    return ""
        return ""

    def to_meta(self) -> list[dict]:
        return [{"round": s.round, "text": s.text} for s in self._rounds]

    @classmethod
    def from_meta(cls, window: int, data: list[dict]) -> RollingMemory:
        memory = cls(window)
        for item in data:
            memory.add(item["round"], item["text"])
        return memory
