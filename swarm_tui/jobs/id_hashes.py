"""Ids given twice in a job, found holding 8 bytes an id: the hash of each id, kept in
`ID_BUCKETS` arrays (by hash) and each bucket sorted alone. A million ids are checked in 8 MB and a
bucket's sort at a time (~0.6 MB), not the 100 MB of a dict of them. The rare hash seen twice
comes back from `repeated()`: the caller reads its ids again to name the two that share it, if
they are one id (two ids may share a hash, too)."""

from __future__ import annotations

from array import array

ID_BUCKETS = 64


class IdHashes:
    """The hashes of a job's ids, as they are read."""

    def __init__(self) -> None:
        self._buckets = [array("q") for _ in range(ID_BUCKETS)]
        self.count = 0

    def add(self, custom_id: str) -> None:
        id_hash = hash(custom_id)
        self._buckets[id_hash % ID_BUCKETS].append(id_hash)
        self.count += 1

    def repeated(self) -> set[int]:
        """The hashes added more than once (sorting makes an object of each, a bucket at a time)."""
        repeated: set[int] = set()
        for bucket in self._buckets:
            previous = None
            for value in sorted(bucket):
                if value == previous:
                    repeated.add(value)
                previous = value
        return repeated
