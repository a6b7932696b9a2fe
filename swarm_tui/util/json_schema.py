"""JSON Schema, through the field's standard library (`jsonschema`): a schema checked once, then
instances validated against it, each failure said as a JSON path and a message.

Used where a schema is declared (a job's `[answer]`, a body's `response_format`, `--schema`: an
invalid schema is refused before anything is sent), where an answer is checked (the engine's
answer checks) and where a tool's arguments are (the toolbox, before the tool runs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
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
    """A schema known to be valid, ready to validate instances (made once per distinct schema).

    jsonschema decides, and says what is wrong. It takes some 30 us to pass a small object, a
    tenth of what the engine spends on a whole task at its ceiling; so a schema written only in
    the keywords nearly every answer schema uses (`_fast_check`) is first checked by a plain
    function that can only say "valid": any instance it does not pass, and any schema using
    another keyword, goes to jsonschema, whose verdict and words are the ones reported."""

    __slots__ = ("schema", "_validator", "_plainly_valid")

    def __init__(self, schema: Any) -> None:
        self.schema = schema
        kind = jsonschema.validators.validator_for(schema)
        self._validator: Validator = kind(schema, format_checker=kind.FORMAT_CHECKER)
        self._plainly_valid = _fast_check(schema) if kind in _PLAIN_DRAFTS else None
        """True only for an instance valid against the schema (False: jsonschema decides); None
        when the schema is not plain (jsonschema decides every instance)."""

    def problems(self, instance: Any) -> list[SchemaProblem]:
        """How `instance` fails the schema (at most `MAX_REPORTED`, the shallowest first); [] when valid."""
        if self._plainly_valid is not None and self._plainly_valid(instance):
            return []
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


_PLAIN_DRAFTS = frozenset(
    {
        jsonschema.Draft6Validator,
        jsonschema.Draft7Validator,
        jsonschema.Draft201909Validator,
        jsonschema.Draft202012Validator,
    }
)
"""The drafts whose keywords `_fast_check` applies as they mean them (draft 4 and 3, which a
schema's `$schema` can name, count 1.0 as no integer, and draft 3 writes `required` otherwise)."""
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$schema", "$id", "$comment"})
_FAST_KEYWORDS = _ANNOTATIONS | {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "enum",
    "const",
    "items",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
}
_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),  # and a float with no fraction (`_Node`), as JSON Schema counts 1.0
    "number": (int, float),
    "boolean": (bool,),  # `type(v) is ...` throughout: True is no integer here, as in JSON Schema
    "object": (dict,),
    "array": (list,),
    "null": (type(None),),
}


def _always(_: Any) -> bool:
    return True


def _fast_check(schema: Any) -> Callable[[Any], bool] | None:
    """A function that returns True only for instances valid against `schema` (False: ask
    jsonschema), or None when the schema uses a keyword it does not know (jsonschema decides all).
    One call a schema node: its type, enum and bounds tested inline, its items and properties
    by their own nodes' functions (a ticket's object of three fields is four calls)."""
    if schema is True or schema == {}:
        return _always
    if not isinstance(schema, dict) or not set(schema) <= _FAST_KEYWORDS:
        return None
    node = _Node.of(schema)
    return None if node is None else node.test


@dataclass(frozen=True, slots=True)
class _Node:
    """One plain schema node's constraints, read once; `test` applies them all to an instance."""

    kinds: frozenset[type] | None
    """The Python types a `type` allows (None: any)."""
    integral_floats: bool
    """`integer` allowed and `number` not: a float passes when it has no fraction."""
    strings: frozenset[str] | None
    """An `enum` / `const` of strings (None: none)."""
    low: float | None
    high: float | None
    min_length: int | None
    max_length: int | None
    min_items: int | None
    max_items: int | None
    items: Callable[[Any], bool] | None
    properties: tuple[tuple[str, Callable[[Any], bool]], ...]
    required: tuple[str, ...]
    closed: frozenset[str] | None
    """The only names an object may have (`additionalProperties: false`), else None."""
    objects: bool
    """An object has something to be checked against (a property's schema, a required name, or
    no extra names allowed)."""

    @classmethod
    def of(cls, schema: dict[str, Any]) -> _Node | None:
        kinds: frozenset[type] | None = None
        integral_floats = False
        if "type" in schema:
            kind = schema["type"]
            names = kind if isinstance(kind, list) else [kind]
            if not all(isinstance(n, str) and n in _PYTHON_TYPES for n in names):
                return None
            kinds = frozenset(t for n in names for t in _PYTHON_TYPES[n])
            integral_floats = "integer" in names and "number" not in names
        strings: frozenset[str] | None = None
        for key in ("enum", "const"):  # both given: a value must be in each
            if key not in schema:
                continue
            allowed = schema[key] if key == "enum" else [schema[key]]
            if not isinstance(allowed, list) or not all(type(a) is str for a in allowed):
                return None  # JSON's equality of numbers and booleans is jsonschema's to apply
            strings = frozenset(allowed) if strings is None else strings & frozenset(allowed)
        low, high = schema.get("minimum"), schema.get("maximum")
        if not all(bound is None or type(bound) in (int, float) for bound in (low, high)):
            return None
        min_length, max_length, min_items, max_items = sizes = [
            schema.get(key) for key in ("minLength", "maxLength", "minItems", "maxItems")
        ]
        if not all(size is None or type(size) is int for size in sizes):
            return None
        items = None
        if "items" in schema:
            items = _fast_check(schema["items"])
            if items is None:
                return None
        properties = schema.get("properties", {})
        required = schema.get("required", [])
        extra = schema.get("additionalProperties", True)
        if not isinstance(properties, dict) or not isinstance(required, list) or not isinstance(extra, bool):
            return None
        subs: list[tuple[str, Callable[[Any], bool]]] = []
        for name, sub in properties.items():
            check = _fast_check(sub)
            if check is None:
                return None
            if check is not _always:
                subs.append((name, check))
        return cls(
            kinds,
            integral_floats,
            strings,
            low,
            high,
            min_length,
            max_length,
            min_items,
            max_items,
            items,
            tuple(subs),
            tuple(required),
            None if extra else frozenset(properties),
            bool(subs or required or not extra),
        )

    def test(self, v: Any) -> bool:
        t = type(v)
        kinds = self.kinds
        if kinds is not None and t not in kinds and not (self.integral_floats and t is float and v.is_integer()):
            return False
        if self.strings is not None and (t is not str or v not in self.strings):
            return False
        if t is str:
            n = len(v)
            return not (
                (self.min_length is not None and n < self.min_length)
                or (self.max_length is not None and n > self.max_length)
            )
        if t is int or t is float:
            return not ((self.low is not None and v < self.low) or (self.high is not None and v > self.high))
        if t is list:
            n = len(v)
            if (self.min_items is not None and n < self.min_items) or (
                self.max_items is not None and n > self.max_items
            ):
                return False
            items = self.items
            if items is not None:
                for x in v:
                    if not items(x):
                        return False
            return True
        if t is dict and self.objects:
            for name in self.required:
                if name not in v:
                    return False
            if self.closed is not None and not self.closed.issuperset(v):
                return False
            for name, check in self.properties:
                if name in v and not check(v[name]):
                    return False
        return True


def _path(parts: Iterable[Any]) -> str:
    out = "$"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if str(part).isidentifier() else f"[{part!r}]")
    return out
