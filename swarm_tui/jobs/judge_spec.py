"""How a run judges its answers, as a job or the command line declares it. No calls here.

In a TOML job:

    [judge]
    rate = 0.05                 # share of answers judged (at least the first 3 of each round)
    rubric = "Is the answer correct, specific and on the task?"   # or rubric_file = "rubric.md"
    action = "flush_memory"     # when quality drifts: alert | flush_memory | pause | failover
    drop = 1.5                  # points below the baseline (a value under 1: a share of it)
    # endpoint = "openai"       # a profile or a base URL (default: the run's own endpoint)
    # model = "gpt-4.1-mini"    # default: the run's model

On the command line: `--judge PROFILE|URL` (or `--judge self`), `--judge-model`,
`--judge-rate`, `--judge-rubric FILE`, `--judge-action`, `--judge-drop`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

ACTIONS = ("alert", "flush_memory", "pause", "failover")
SELF = "self"
"""`--judge self`: the run's own endpoint and model judge its answers."""

DEFAULT_RUBRIC = (
    "Judge whether the answer does what the task asks: correct, specific, complete for its length, "
    "and free of repetition, confusion or material from other tasks. 10 is an answer an expert would "
    "sign; 5 is usable with edits; 1 is useless or off the task."
)

JUDGE_KEYS = frozenset(
    {"endpoint", "model", "rate", "first", "rubric", "rubric_file", "action", "drop", "baseline", "window"}
)

Report = Callable[[str, str], None]


@dataclass(frozen=True)
class JudgeSpec:
    endpoint: str | None = None
    """A profile name or a base URL; None: the run's own endpoint."""
    model: str | None = None
    """None: the run's model."""
    rate: float = 0.05
    first: int = 3
    """The first answers of each round are judged whatever the rate (a baseline needs them)."""
    rubric: str = DEFAULT_RUBRIC
    action: str | None = None
    """None: `flush_memory` for a multi-round swarm, else `alert`."""
    drop: float = 1.5
    """The rolling score may fall this far below the baseline (points; under 1: a share of it)."""
    baseline: int = 8
    """Judged answers that make the baseline (of the run, or of the rounds after a flush)."""
    window: int = 10
    """Judged answers in the rolling score."""
    max_tokens: int = 200

    def action_for(self, multi_round: bool) -> str:
        return self.action or ("flush_memory" if multi_round else "alert")

    def allowed_drop(self, baseline: float) -> float:
        return self.drop * baseline if self.drop < 1 else self.drop

    def to_meta(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_meta(cls, data: dict[str, Any]) -> JudgeSpec:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def parse_judge_spec(doc: dict[str, Any], base_dir: Path, report: Report) -> JudgeSpec | None:
    """The `[judge]` table of a TOML job; None when it has none."""
    table = doc.get("judge")
    if table is None:
        return None
    if not isinstance(table, dict):
        report("judge", "must be a table ([judge] rate, rubric, action, ...)")
        return None
    for key in table:
        if key not in JUDGE_KEYS:
            report(f"judge.{key}", f"unknown key (known: {', '.join(sorted(JUDGE_KEYS))})")
    spec = JudgeSpec()
    changes: dict[str, Any] = {}
    for key in ("endpoint", "model", "rubric"):
        if key in table:
            if isinstance(table[key], str) and table[key].strip():
                changes[key] = table[key].strip()
            else:
                report(f"judge.{key}", "must be a non-empty string")
    if "rubric_file" in table:
        rubric = read_rubric(base_dir / str(table["rubric_file"]), lambda message: report("judge.rubric_file", message))
        if rubric is not None:
            changes["rubric"] = rubric
    changes |= _numbers(table, report)
    if "action" in table:
        if table["action"] in ACTIONS:
            changes["action"] = table["action"]
        else:
            report("judge.action", f"unknown action {table['action']!r} (known: {', '.join(ACTIONS)})")
    return replace(spec, **changes)


def _numbers(table: dict[str, Any], report: Report) -> dict[str, Any]:
    rules: dict[str, tuple[type, float, float, str]] = {
        "rate": (float, 0.0, 1.0, "a share from 0 to 1"),
        "drop": (float, 0.0, 9.0, "points from 0 to 9 (under 1: a share of the baseline)"),
        "first": (int, 0, 1000, "an integer from 0 to 1000"),
        "baseline": (int, 1, 1000, "an integer from 1 to 1000"),
        "window": (int, 1, 1000, "an integer from 1 to 1000"),
    }
    out: dict[str, Any] = {}
    for key, (kind, low, high, what) in rules.items():
        if key not in table:
            continue
        value = table[key]
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or (kind is int and not isinstance(value, int)) or not low <= value <= high:
            report(f"judge.{key}", f"must be {what}, not {value!r}")
            continue
        out[key] = kind(value)
    return out


def read_rubric(path: Path, report: Callable[[str], None]) -> str | None:
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        report(f"cannot read the rubric {path}: {exc.strerror or exc}")
        return None
    if not text:
        report(f"the rubric {path} is empty")
        return None
    return text
