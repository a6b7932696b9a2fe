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

    __slots__ = ("schema", "_validator", "_fast")

    def __init__(self, schema: Any) -> None:
        self.schema = schema
        kind = jsonschema.validators.validator_for(schema)
        self._validator: Validator = kind(schema, format_checker=kind.FORMAT_CHECKER)
        self._fast = _fast_check(schema)

    def problems(self, instance: Any) -> list[SchemaProblem]:
        """How `instance` fails the schema (at most `MAX_REPORTED`, the shallowest first); [] when valid."""
        if self._fast is not None and self._fast(instance):
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
_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: type(v) is str,
    "integer": lambda v: (type(v) is int) or (type(v) is float and v.is_integer()),
    "number": lambda v: type(v) in (int, float),
    "boolean": lambda v: type(v) is bool,
    "object": lambda v: type(v) is dict,
    "array": lambda v: type(v) is list,
    "null": lambda v: v is None,
}


def _fast_check(schema: Any) -> Callable[[Any], bool] | None:
    """A function that returns True only for instances valid against `schema` (False: ask
    jsonschema), or None when the schema uses a keyword it does not know (jsonschema decides all)."""
    if schema is True or schema == {}:
        return lambda _: True
    if not isinstance(schema, dict) or not set(schema) <= _FAST_KEYWORDS:
        return None
    tests: list[Callable[[Any], bool]] = []
    kind = schema.get("type")
    if kind is not None:
        names = kind if isinstance(kind, list) else [kind]
        if not all(isinstance(n, str) and n in _TYPES for n in names):
            return None
        checks = [_TYPES[n] for n in names]
        tests.append(checks[0] if len(checks) == 1 else lambda v: any(check(v) for check in checks))
    if "enum" in schema or "const" in schema:
        allowed = schema["enum"] if "enum" in schema else [schema["const"]]
        if not isinstance(allowed, list) or not all(type(a) is str for a in allowed):
            return None  # JSON's equality of numbers and booleans is jsonschema's to apply
        strings = frozenset(allowed)
        tests.append(lambda v: type(v) is str and v in strings)
    bounds = _bounds(schema)
    if bounds is None:
        return None
    tests.extend(bounds)
    if "items" in schema:
        item = _fast_check(schema["items"])
        if item is None:
            return None
        tests.append(lambda v: type(v) is not list or all(item(x) for x in v))
    if "properties" in schema or "required" in schema or "additionalProperties" in schema:
        test = _object_test(schema)
        if test is None:
            return None
        tests.append(test)
    if len(tests) == 1:
        return tests[0]
    return _every(tuple(tests))


def _every(tests: tuple[Callable[[Any], bool], ...]) -> Callable[[Any], bool]:
    """One test that passes when each of `tests` does (a loop: `all()` over a generator costs twice)."""

    def test(v: Any) -> bool:
        for each in tests:
            if not each(v):
                return False
        return True

    return test


def _bounds(schema: dict[str, Any]) -> list[Callable[[Any], bool]] | None:
    """The tests of a schema's numeric and size bounds (None: a bound that is not a plain number)."""
    tests: list[Callable[[Any], bool]] = []
    if "minimum" in schema:
        low = schema["minimum"]
        if not _number(low):
            return None
        tests.append(lambda v: not _number(v) or v >= low)
    if "maximum" in schema:
        high = schema["maximum"]
        if not _number(high):
            return None
        tests.append(lambda v: not _number(v) or v <= high)
    for key, kind in (("minLength", str), ("maxLength", str), ("minItems", list), ("maxItems", list)):
        if key not in schema:
            continue
        bound = schema[key]
        if type(bound) is not int:
            return None
        tests.append(_size_test(bound, kind, at_least=key.startswith("min")))
    return tests


def _size_test(bound: int, kind: type, *, at_least: bool) -> Callable[[Any], bool]:
    """A string's or an array's length against `bound` (another type passes: not its keyword)."""

    def test(v: Any) -> bool:
        if type(v) is not kind or not isinstance(v, str | list):
            return True
        return len(v) >= bound if at_least else len(v) <= bound

    return test


def _object_test(schema: dict[str, Any]) -> Callable[[Any], bool] | None:
    """The test of an object's properties, required names and extra names (None: not plain)."""
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if not isinstance(properties, dict) or not isinstance(required, list) or not isinstance(extra, bool):
        return None
    subs: dict[str, Callable[[Any], bool]] = {}
    for name, sub in properties.items():
        check = _fast_check(sub)
        if check is None:
            return None
        subs[name] = check
    known = frozenset(subs)
    pairs = tuple(subs.items())

    def test(v: Any) -> bool:
        if type(v) is not dict:
            return True
        for name in required:
            if name not in v:
                return False
        if not extra and not known.issuperset(v):
            return False
        for name, check in pairs:
            if name in v and not check(v[name]):
                return False
        return True

    return test


def _number(value: Any) -> bool:
    return type(value) in (int, float)


def _path(parts: Iterable[Any]) -> str:
    out = "$"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if str(part).isidentifier() else f"[{part!r}]")
    return out
