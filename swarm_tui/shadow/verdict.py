"""The decision of a shadow run and the records it is made on.

The primary is judged, the secondary is its baseline. ROLLBACK (go back to the secondary) when the
primary's p95 latency is more than `threshold` times the secondary's, when the primary's error rate
is more than `max_error_excess` above the secondary's (with at least two errors: one error alone
never decides), or when the primary answered nothing; otherwise ADOPT (keep the primary).

With a judge (`--judge`), one more ROLLBACK: when the judge prefers the secondary's answers clearly
(`decide_judged`): on at least `min_pairs` judged pairs, the secondary judged better in at least
`margin` (10 points) more of them than the primary, and a one-sided sign test over the pairs that
were not "equal" puts the chance of so many secondary wins from a judge without preference under
`alpha` (0.05). A primary judged better never overrules the latency and error rules (they are the
article's, kept as they are): the report says so, the verdict stays theirs.

`EndpointReport` holds one endpoint's figures; `ShadowReport` the whole run's, with the verdict,
its reasons, the `judgement` block and the exit code (the record shadow.json is written from).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from swarm_tui.shadow.config import ShadowJudge

ADOPT, ROLLBACK = "ADOPT", "ROLLBACK"
PENDING = "PENDING"
"""The verdict of a live snapshot before both endpoints have finished a request."""
EXIT_ADOPT, EXIT_ROLLBACK, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130
MIN_CONFIDENT_SAMPLES = 20
"""Below this many successful answers from the secondary (the baseline, which gets only the mirrored
share) the report flags its verdict as indicative."""


@dataclass
class EndpointReport:
    label: str
    name: str
    base_url: str
    model: str | None
    simulated: bool
    requests: int
    in_flight: int
    succeeded: int
    errors: dict[str, int]
    error_rate: float | None
    latency_ms: dict[str, float | None]
    ttft_ms: dict[str, float | None] | None
    tokens: dict[str, int]
    cost_usd: float | None
    cost_display: str
    price: dict[str, Any] | None

    @property
    def failed(self) -> int:
        return sum(self.errors.values())


@dataclass
class ShadowReport:
    started_at: float
    elapsed_s: float
    finished: bool
    stopped_early: bool
    settings: dict[str, Any]
    primary: EndpointReport
    secondary: EndpointReport
    paired: dict[str, Any]
    agreement: dict[str, Any]
    p95_ratio: float | None
    error_excess: float | None
    verdict: str
    reasons: list[str]
    notes: list[str]
    judgement: dict[str, Any]
    """Which endpoint was judged against which, on what figures, and what each verdict means."""
    judged_agreement: dict[str, Any] | None = None
    """With `--judge`: which answer of each judged pair was better, and what the judge cost."""

    @property
    def exit_code(self) -> int:
        if self.stopped_early:
            return EXIT_INTERRUPTED
        return EXIT_ADOPT if self.verdict == ADOPT else EXIT_ROLLBACK

    @property
    def shadow_cost_usd(self) -> float | None:
        """What the mirrored traffic cost: kept apart from the primary's (the real run's) cost."""
        return self.secondary.cost_usd

    @property
    def judge_cost_usd(self) -> float | None:
        """What the judge's calls cost: apart from both endpoints'."""
        return self.judged_agreement["cost_usd"] if self.judged_agreement else None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["shadow_cost_usd"] = self.shadow_cost_usd
        data["judge_cost_usd"] = self.judge_cost_usd
        data["exit_code"] = self.exit_code
        return data


def decide(
    primary: EndpointReport, secondary: EndpointReport, *, threshold: float, max_error_excess: float
) -> tuple[str, float | None, float | None, list[str], list[str]]:
    """(verdict, p95 ratio, error-rate excess, reasons, notes): the primary (the endpoint that carries
    the traffic) judged against the secondary (the mirrored baseline, where a ROLLBACK goes back to).

    ratio = primary p95 / secondary p95; excess = primary error rate - secondary error rate."""
    reasons: list[str] = []
    notes: list[str] = []
    rollback = False
    p1, p2 = primary.latency_ms["p95"], secondary.latency_ms["p95"]
    ratio = round(p1 / p2, 3) if p1 is not None and p2 else None
    if primary.succeeded == 0:
        rollback = True
        reasons.append(f"the primary answered none of its {primary.requests} request(s)")
    elif ratio is None:
        notes.append(
            f"no p95 ratio: the secondary (the baseline) answered none of its {secondary.requests} "
            "request(s), so the primary's latency is not judged"
        )
    else:
        rollback = ratio > threshold
        reasons.append(
            f"primary p95 {p1:.0f} ms vs secondary p95 {p2:.0f} ms: ratio {ratio:.2f} "
            f"{'>' if rollback else '<='} threshold {threshold:g}"
        )
    e1, e2 = primary.error_rate, secondary.error_rate or 0.0
    excess = round(e1 - e2, 4) if e1 is not None else None
    if excess is not None:
        if excess > max_error_excess and primary.failed >= 2:
            rollback = True
            reasons.append(
                f"primary error rate {e1:.1%} vs secondary {e2:.1%}: {excess * 100:.1f} points above "
                f"the secondary's (limit {max_error_excess * 100:g})"
            )
        else:
            reasons.append(f"primary error rate {e1:.1%} vs secondary {e2:.1%}")
    if 0 < secondary.succeeded < MIN_CONFIDENT_SAMPLES:
        notes.append(
            f"only {secondary.succeeded} successful answer(s) from the secondary (the baseline): the verdict "
            "is indicative; raise --duration, --rps or --rate for more"
        )
    return (ROLLBACK if rollback else ADOPT), ratio, excess, reasons, notes


def sign_test_p(wins: int, losses: int) -> float:
    """One-sided sign test: the chance of at least `wins` of `wins + losses` fair coin tosses."""
    n = wins + losses
    if n == 0:
        return 1.0
    return sum(math.comb(n, k) for k in range(wins, n + 1)) / 2**n


def decide_judged(
    judged: dict[str, Any] | None, *, min_pairs: int, margin: float, alpha: float
) -> tuple[bool, list[str], list[str]]:
    """(rollback, reasons, notes) from the judge's pairwise preferences (`judged_agreement`)."""
    if judged is None:
        return False, [], []
    notes: list[str] = []
    n = judged["judged"]
    pb, eq, sb = judged["primary_better"], judged["equal"], judged["secondary_better"]
    if judged["errors"]:
        asked = n + judged["errors"]
        notes.append(
            f"the judge gave no verdict on {judged['errors']} of {asked} pair(s) "
            f"({', '.join(f'{k} {v}' for k, v in sorted(judged['errors_by_kind'].items()))}): not counted"
        )
    positions = judged["positions"]
    decisive = positions["said_a"] + positions["said_b"]
    if decisive >= min_pairs and max(positions["said_a"], positions["said_b"]) >= 0.8 * decisive:
        first = positions["said_a"] >= positions["said_b"]
        notes.append(
            f"the judge said {'A' if first else 'B'} in {max(positions['said_a'], positions['said_b'])} of "
            f"{decisive} decisive verdicts: a position bias, cancelled by showing the primary as A in half the pairs"
        )
    if n < min_pairs:
        return (
            False,
            [f"judge: {n} judged pair(s), under the minimum of {min_pairs}: its preference is not counted"],
            notes,
        )
    p = sign_test_p(sb, pb)
    lead = (sb - pb) / n
    split = (
        f"primary better {pb} ({pb / n:.0%}), equal {eq} ({eq / n:.0%}), secondary better {sb} ({sb / n:.0%}) "
        f"of {n} judged pairs"
    )
    if lead >= margin and p < alpha:
        return (
            True,
            [
                f"judge: {split}: the secondary's answers are clearly better ({lead * 100:.0f} points ahead "
                f">= {margin * 100:g}, sign test p {p:.3g} < {alpha:g})"
            ],
            notes,
        )
    if pb > sb:
        why = "the primary's answers are judged better (this never overrules latency or errors)"
    elif lead >= margin:
        why = f"the secondary leads but could be chance (sign test p {p:.3g} >= {alpha:g})"
    else:
        why = f"no clear preference for the secondary (needs {margin * 100:g} points ahead and sign test p < {alpha:g})"
    return False, [f"judge: {split}: {why}"], notes


def verdict_meaning(verdict: str, primary_name: str, secondary_name: str) -> str:
    """What a verdict asks you to do, in plain words."""
    if verdict == ADOPT:
        return f"keep the primary {primary_name}"
    if verdict == ROLLBACK:
        return f"go back to the secondary {secondary_name}"
    return "waiting for both endpoints' first answers"


def judgement(
    primary: EndpointReport,
    secondary: EndpointReport,
    *,
    ratio: float | None,
    excess: float | None,
    threshold: float,
    max_error_excess: float,
    judge: ShadowJudge | None = None,
    judged: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The `judgement` block of shadow.json: which endpoint is judged against which, and on what figures
    (`judge`: the `ShadowJudge` settings, `judged`: its `judged_agreement`, when there is a judge)."""
    block = {
        "judged": "primary",
        "baseline": "secondary",
        "judged_endpoint": primary.name,
        "baseline_endpoint": secondary.name,
        "primary_p95_ms": primary.latency_ms["p95"],
        "secondary_p95_ms": secondary.latency_ms["p95"],
        "p95_ratio": ratio,
        "p95_ratio_is": "primary p95 / secondary p95",
        "threshold": threshold,
        "primary_error_rate": primary.error_rate,
        "secondary_error_rate": secondary.error_rate,
        "error_excess": excess,
        "error_excess_is": "primary error rate - secondary error rate",
        "max_error_excess": max_error_excess,
        "adopt_means": verdict_meaning(ADOPT, primary.name, secondary.name),
        "rollback_means": verdict_meaning(ROLLBACK, primary.name, secondary.name),
    }
    if judge is not None:
        n = judged["judged"] if judged else 0
        block |= {
            "judged_pairs": n,
            "secondary_better_lead": round((judged["secondary_better"] - judged["primary_better"]) / n, 4)
            if judged and n
            else None,
            "secondary_better_lead_is": "(secondary better - primary better) / judged pairs",
            "sign_test_p": round(sign_test_p(judged["secondary_better"], judged["primary_better"]), 6)
            if judged
            else None,
            "judge_min_pairs": judge.min_pairs,
            "judge_margin": judge.margin,
            "judge_alpha": judge.alpha,
        }
    return block
