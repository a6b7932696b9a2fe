"""JSON Schema, through the field's standard library (`jsonschema`): a schema checked once, then
instances validated against it, each failure said as a JSON path and a message.

Used where a schema is declared (a job's `[answer]`, a body's `response_format`, `--schema`: an
invalid schema is refused before anything is sent), where an answer is checked (the engine's
answer checks) and where a tool's arguments are (the toolbox, before the tool runs).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError
from jsonschema.protocols import Validator

__all__ = ["SchemaProblem", "CompiledSchema", "schema_problem", "compiled"]

MAX_REPORTED = 3
"""Failures of one instance said (the first ones, by path): a re-ask carries them whole."""


@dataclass(frozen=True, slots=True)
class SchemaProblem:
    """One way an instance fails its schema: where (`$.items[2].status`) and what is wrong."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"at {self.path}: {self.message}"


def schema_problem(schema: Any) -> str | None:
    """What is wrong with `schema` as a JSON Schema (its own metaschema's words), None when valid."""
    if not isinstance(schema, dict | bool):
        return f"a JSON Schema is an object (or true/false), not {type(schema).__name__}"
    if isinstance(schema, bool):
        return None
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        where = _path(exc.absolute_path)
        return f"{exc.message} (at {where} of the schema)"
    return None


class CompiledSchema:
    """A schema known to be valid, ready to validate instances (made once per distinct schema)."""

    __slots__ = ("schema", "_validator")

    def __init__(self, schema: Any) -> None:
        self.schema = schema
        kind = jsonschema.validators.validator_for(schema)
        self._validator: Validator = kind(schema, format_checker=kind.FORMAT_CHECKER)

    def problems(self, instance: Any) -> list[SchemaProblem]:
        """How `instance` fails the schema (at most `MAX_REPORTED`, the shallowest first); [] when valid."""
        errors = sorted(
            self._validator.iter_errors(instance), key=lambda e: (len(e.absolute_path), _path(e.absolute_path))
        )
        return [SchemaProblem(_path(e.absolute_path), e.message) for e in errors[:MAX_REPORTED]]


_COMPILED: dict[str, CompiledSchema] = {}


def compiled(schema: Any, key: str) -> CompiledSchema:
    """The compiled schema of `schema`, shared by every caller that names it by the same `key`
    (its canonical JSON text): a job's thousand bodies that ask for one schema compile it once."""
    found = _COMPILED.get(key)
    if found is None:
        if len(_COMPILED) > 1024:  # every body its own schema: keep memory bounded
            _COMPILED.clear()
        found = _COMPILED[key] = CompiledSchema(schema)
    return found


def _path(parts: Iterable[Any]) -> str:
    out = "$"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if str(part).isidentifier() else f"[{part!r}]")
    return out
