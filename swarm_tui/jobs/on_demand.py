"""A job's parts made when read, not held: its tasks, a `count`'s prompts (`OnDemand`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar, overload

T = TypeVar("T")


class OnDemand(Sequence[T]):
    """A sequence whose items are made when read: a subclass gives `__len__` and `_item(position)`
    for a position in range; negative positions, bounds and slices (made by going through the
    items, one read of a file) are handled here."""

    def __len__(self) -> int:
        raise NotImplementedError

    def _item(self, position: int) -> T:
        raise NotImplementedError

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> list[T]: ...
    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            return list(self)[index]
        count = len(self)
        position = index + count if index < 0 else index
        if not 0 <= position < count:
            raise IndexError(index)
        return self._item(position)
