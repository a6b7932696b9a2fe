"""The journal's SQLite connection: the one place every journal write passes through.

Each string a statement binds is masked of the process's keys (`swarm_tui.util.secrets`: an error
code, a request id or a header a provider echoed the key in never reaches the file, nor its WAL)
and made storable: SQLite keeps UTF-8, and a lone surrogate (a provider's `\\ud800` escape,
decoded by a JSON reader) would fail the whole transaction, and with it the answers it carries.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from swarm_tui.util import secrets
from swarm_tui.util.strict_json import storable_text


class MaskedConnection:
    """`sqlite3.Connection`'s `execute`, `executemany`, `executescript` and `close`, strings made safe."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        return self._db.execute(sql, _safe_row(params))

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> sqlite3.Cursor:
        return self._db.executemany(sql, (_safe_row(row) for row in rows))

    def executescript(self, script: str) -> sqlite3.Cursor:
        return self._db.executescript(script)

    def close(self) -> None:
        self._db.close()


def _safe_row(params: Sequence[Any]) -> Sequence[Any]:
    masking = secrets.registered()
    for value in params:  # most rows, with no key registered, have nothing to do: no new tuple
        if type(value) is str and (masking or not value.isascii()):
            return tuple(_safe(value, masking) if type(value) is str else value for value in params)
    return params


def _safe(text: str, masking: bool) -> str:
    if text.isascii():  # no surrogate can be in it (a flag CPython keeps: no scan)
        return secrets.mask(text) if masking and secrets.found_in(text.encode("ascii")) else text
    try:
        data = text.encode("utf-8")  # the bytes SQLite will store (a plain copy for ASCII)
    except UnicodeEncodeError:
        text = storable_text(text)
        data = text.encode("utf-8")
    if masking and secrets.found_in(data):  # the cheap check first: most strings hold no key
        return secrets.mask(text)
    return text
