"""What a job says a usable answer is (`AnswerSpec`), as plain data the engine reads; how a
`python = "module:function"` check is found. Declared and checked when a job loads
(`jobs.answer_spec`); applied to answers by the engine (`engine.answers`).
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

__all__ = ["AnswerSpec", "Validator", "resolve_python", "takes_parsed"]

Validator = Callable[..., Any]
"""A job's `python` check: called with the answer's text (and its JSON value, when it takes a
second argument); returns None, or what is wrong with the answer."""


@dataclass(frozen=True)
class AnswerSpec:
    """The checks a job asks of every answer beyond its body's own `response_format`."""

    schema: Any = None
    """A JSON Schema every answer's JSON value must match (None: no schema)."""
    json: bool = False
    """The answer must hold a JSON value (extracted robustly: fences, leading prose)."""
    regex: str | None = None
    min_chars: int | None = None
    python: str | None = None
    """`module:function`, imported with the job's directory first on the path (`base`)."""
    base: str | None = None
    """The job's directory."""
    source: str = ""
    """Where it was declared (the job file, `--schema FILE`): named by a failed check's message."""

    @property
    def reads_json(self) -> bool:
        return self.json or self.schema is not None

    @property
    def any(self) -> bool:
        return self.reads_json or self.regex is not None or self.min_chars is not None or self.python is not None

    def with_schema(self, schema: Any, source: str) -> AnswerSpec:
        """These checks and `--schema FILE`'s schema (which wins over the job's)."""
        return replace(self, schema=schema, source=source)

    def to_meta(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_meta(cls, data: dict[str, Any] | None) -> AnswerSpec | None:
        if not data:
            return None
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def resolve_python(name: str, base: str | None) -> Validator:
    """The function `module:function` names, imported with the job's directory (`base`) first on
    the path; ImportError, AttributeError or TypeError saying why it cannot be used."""
    module_name, sep, attr = name.partition(":")
    if not sep or not module_name or not attr:
        raise TypeError(f"{name!r} is not module:function")
    added = base is not None and base not in sys.path
    if added:
        sys.path.insert(0, str(base))
    try:
        module = importlib.import_module(module_name)
    finally:
        if added:
            sys.path.remove(str(base))
    function: Validator = getattr(module, attr)
    if not callable(function):
        raise TypeError(f"{name} is not a function")
    return function


def takes_parsed(function: Validator) -> bool:
    """The validator takes a second argument (the answer's JSON value) besides its text."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in parameters)
