"""The settings of one shadow run (`ShadowConfig`) and their validation, the rule that picks which
requests are mirrored to the secondary, the `--primary`/`--secondary` arguments (a profile
name or a base URL) turned into provider profiles, and the `--judge*` options turned into the
judge's settings (`ShadowJudge`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from swarm_tui.core.errors import InputError
from swarm_tui.jobs.judge_spec import SELF, read_rubric
from swarm_tui.pricing.currency import USD, DisplayCurrency
from swarm_tui.providers.profile import ProviderProfile, is_loopback_url

PAIRWISE_RUBRIC = (
    "Prefer the answer that does what the task asks: correct, specific, complete for its length, in the "
    "format the task asks for, and free of repetition, confusion or material from other tasks. Length "
    'alone is no reason to prefer an answer; say "equal" when neither is clearly better.'
)
"""What a better answer is, unless `--judge-rubric FILE` says otherwise."""


@dataclass(frozen=True)
class ShadowJudge:
    """`--judge`: a judge asked which of the two answers of a mirrored pair is better."""

    endpoint: ProviderProfile | None = None
    """None: the primary judges (`--judge self`), with its own client."""
    model: str | None = None
    """None: the judge endpoint's model, else the primary's."""
    rubric: str = PAIRWISE_RUBRIC
    rate: float = 1.0
    """Share of the answered pairs judged (evenly spread); the mirror is a sample already."""
    max_tokens: int = 200
    seed: int = 0
    """Seeds which pair of each block of two shows the primary as ANSWER A."""
    min_pairs: int = 10
    """The judge's preference enters the verdict only on at least this many judged pairs."""
    margin: float = 0.10
    """ROLLBACK when the secondary is judged better in at least this share more of the judged pairs..."""
    alpha: float = 0.05
    """... and a one-sided sign test (ties dropped) puts the chance of that under this."""

    @property
    def is_self(self) -> bool:
        return self.endpoint is None


@dataclass
class ShadowConfig:
    primary: ProviderProfile
    """The endpoint judged: it carries all the traffic (the one migrated to)."""
    secondary: ProviderProfile
    """The baseline: gets the mirrored share; a ROLLBACK goes back to it."""
    model: str | None = None
    """The model asked of the primary (and of the secondary unless `secondary_model`); None keeps
    the model each job body names."""
    secondary_model: str | None = None
    rate: float = 0.1
    duration_s: float = 600.0
    threshold: float = 2.0
    """ROLLBACK when the primary's p95 is more than this many times the secondary's."""
    max_error_excess: float = 0.01
    """ROLLBACK when the primary's error rate exceeds the secondary's by more than this (0.01 = 1 point)."""
    rps: float = 2.0
    """Requests a second sent to the primary (steady, open loop)."""
    bodies: list[dict[str, Any]] | None = None
    """A job's request bodies, sent in order (once each); None: the built-in probe workload."""
    workload: str = "probe"
    stream: bool = False
    timeout_s: float = 30.0
    max_tokens: int = 64
    """max_tokens of probe requests."""
    max_in_flight: int = 256
    prices: dict[str, Any] = field(default_factory=dict)
    billing: dict[str, Any] = field(default_factory=dict)
    currency: DisplayCurrency = USD
    sim: Any = None
    """SimConfig for endpoints that are the built-in `sim` profile (each gets its own simulator)."""
    update_interval_s: float = 0.5
    judge: ShadowJudge | None = None
    """None: answers are compared exactly and as JSON only."""

    def problems(self) -> list[tuple[str, str]]:
        out = []
        if not 0 < self.rate <= 1:
            out.append(("--rate", f"must be a share in (0, 1], e.g. 0.1 for 10%, not {self.rate!r}"))
        for name, value in (
            ("--duration", self.duration_s),
            ("--threshold", self.threshold),
            ("--rps", self.rps),
            ("--timeout", self.timeout_s),
        ):
            if not value > 0:
                out.append((name, f"must be greater than 0, not {value!r}"))
        if not 0 <= self.max_error_excess <= 1:
            out.append(("--max-error-excess", f"must be between 0 and 1, not {self.max_error_excess!r}"))
        if self.judge is not None and not 0 < self.judge.rate <= 1:
            out.append(
                ("--judge-rate", f"must be a share in (0, 1], e.g. 0.5 for half the pairs, not {self.judge.rate!r}")
            )
        if self.bodies is not None and not self.bodies:
            out.append(("--job", "the job has no request"))
        if not out and self.expected_mirrored() < 1:
            out.append(
                (
                    "--rate",
                    f"{self.rate:g} of {self.expected_requests()} request(s) mirrors none to the "
                    "secondary: raise --rate, --duration or --rps",
                )
            )
        return out

    def check(self) -> None:
        problems = self.problems()
        if problems:
            raise InputError.single("shadow", problems[0][0], problems[0][1])

    def expected_requests(self) -> int:
        n = max(1, math.ceil(self.duration_s * self.rps - 1e-9))
        return min(n, len(self.bodies)) if self.bodies is not None else n

    def expected_mirrored(self) -> int:
        return sum(1 for i in range(self.expected_requests()) if mirrored(i, self.rate))


def mirrored(i: int, rate: float) -> bool:
    """Whether request `i` (0-based) goes to the secondary too: exactly `rate` of them, evenly spread."""
    return math.floor((i + 1) * rate + 1e-9) > math.floor(i * rate + 1e-9)


def endpoint_profile(
    spec: str, config: Any, *, label: str, model: str | None = None, api_key_env: str | None = None
) -> ProviderProfile:
    """`--primary`/`--secondary`: a profile name from the config, or a base URL."""
    if "://" in spec:
        profile = ProviderProfile(
            name=endpoint_name(spec), base_url=spec, model=model, api_key_env=api_key_env or "OPENAI_API_KEY"
        )
        problem = profile.problem()
        if problem:
            raise InputError.single(f"--{label}", problem[0], problem[1])
        return profile
    profile = config.profile(spec).with_overrides(model=model, api_key_env=api_key_env)
    problem = profile.problem()
    if problem:
        raise InputError.single(f"--{label}", problem[0], problem[1])
    return profile


def endpoint_name(url: str) -> str:
    """A provider name for a base URL, used to find its prices: `https://api.holysheep.ai/v1` →
    `holysheep`; a loopback or IP address → `host:port` (official prices apply)."""
    parsed = urlparse(url)
    host = (parsed.hostname or "").lower()
    if is_loopback_url(url) or re.fullmatch(r"[\d.:]+", host) or "." not in host:
        return f"{host}:{parsed.port}" if parsed.port else host or "endpoint"
    labels = [part for part in host.split(".") if part not in ("api", "www")]
    return labels[-2] if len(labels) >= 2 else labels[0]


def shadow_judge(
    spec: str | None,
    config: Any,
    *,
    model: str | None = None,
    rubric_file: Path | None = None,
    rate: float | None = None,
    api_key_env: str | None = None,
) -> ShadowJudge | None:
    """`--judge PROFILE|URL|self` and its `--judge-*` options; None without `--judge` (a `--judge-*`
    option without it is refused: exit 2, nothing sent)."""
    given = {
        "--judge-model": model,
        "--judge-rubric": rubric_file,
        "--judge-rate": rate,
        "--judge-key-env": api_key_env,
    }
    if spec is None:
        flag = next((name for name, value in given.items() if value is not None), None)
        if flag is not None:
            raise InputError.single(flag, "judge", f"{flag} needs --judge PROFILE|URL|self")
        return None
    rubric = PAIRWISE_RUBRIC
    if rubric_file is not None:

        def problem(message: str) -> None:
            raise InputError.single(str(rubric_file), "--judge-rubric", message)

        rubric = read_rubric(rubric_file, problem) or rubric
    endpoint = None
    if spec.strip().lower() != SELF:
        endpoint = endpoint_profile(spec, config, label="judge", model=model, api_key_env=api_key_env)
    elif api_key_env is not None:
        raise InputError.single("--judge-key-env", "judge", "--judge self uses the primary's key")
    return ShadowJudge(endpoint=endpoint, model=model, rubric=rubric, rate=1.0 if rate is None else rate)
