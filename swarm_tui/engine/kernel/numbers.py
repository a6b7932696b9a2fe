"""Attempt numbering: each task's attempts are numbered 1, 2, 3... across every session of a run
(the journal's rows are keyed by them), and counted per round: a round's attempts are its
retries' budget, and a new round (the user's retry, an agent's next step) starts it over.

The local engine and the Ray driver hold one each: the driver takes the numbers its shards' and
its batch lane's attempts used, so that a task handed to another shard numbers on from them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


class AttemptNumbers:
    def __init__(self, made: Mapping[int, int] | None = None) -> None:
        """`made`: the last attempt number of each task in earlier sessions (the journal's)."""
        self._last: dict[int, int] = dict(made or {})
        self._round: dict[int, int] = {}

    def next(self, index: int) -> int:
        """Take the number of a new attempt of `index`."""
        number = self._last.get(index, 0) + 1
        self._last[index] = number
        return number

    def peek(self, index: int) -> int:
        """The number the next attempt of `index` will take (nothing taken yet)."""
        return self._last.get(index, 0) + 1

    def take(self, index: int, number: int) -> None:
        """Attempt `number` of `index` is taken (a shard's, a line of a batch an earlier session submitted)."""
        if number > self._last.get(index, 0):
            self._last[index] = number

    def tried(self, index: int) -> bool:
        """An attempt of `index` was ever made."""
        return index in self._last

    def made(self, indices: Iterable[int]) -> dict[int, int]:
        """The last numbers of these tasks (those ever tried): where a shard handed them numbers on from."""
        last = self._last
        return {i: last[i] for i in indices if i in last}

    def in_round(self, index: int) -> int:
        """Attempts of `index` in this round (1 before the first: its retries' budget)."""
        return self._round.get(index, 1)

    def count(self, index: int) -> None:
        """A new attempt of `index` in this round went out."""
        self._round[index] = self._round.get(index, 0) + 1

    def uncount(self, index: int) -> None:
        """Its last attempt does not count toward the round's budget (the run was suspended under it)."""
        made = self._round.get(index, 0)
        if made > 1:
            self._round[index] = made - 1
        else:
            self._round.pop(index, None)

    def new_round(self, index: int) -> None:
        """Its attempt budget starts over (the user's retry, an agent's next step)."""
        self._round.pop(index, None)
