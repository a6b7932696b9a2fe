"""Quality drift: a rolling judge score against its baseline (the article's context-pollution
row: "detected by a drop of the LLM-as-a-Judge score — flush the KV cache").

The baseline is the mean of the first `baseline` judged answers of the run, or of the answers
judged after the last action (a flush starts the swarm's memory over, so its quality is measured
anew). The rolling score is the mean of the last `window` judged answers. Drift is when the
rolling score, over a full window, falls more than the allowed drop below the baseline; then the
window starts over, so one drift fires one action.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from swarm_tui.jobs.judge_spec import JudgeSpec


@dataclass(frozen=True)
class Drift:
    rolling: float
    baseline: float


class QualityMonitor:
    def __init__(self, spec: JudgeSpec) -> None:
        self.spec = spec
        self._baseline_scores: list[float] = []
        self.baseline: float | None = None
        self.recent: deque[float] = deque(maxlen=spec.window)
        self.history: list[float] = []
        """Every score, in the order judged (the sparkline's source)."""

    @property
    def rolling(self) -> float | None:
        return sum(self.recent) / len(self.recent) if self.recent else None

    def observe(self, score: float) -> Drift | None:
        """Take a judged score; the drift it reveals, if any."""
        self.history.append(score)
        if self.baseline is None:
            self._baseline_scores.append(score)
            if len(self._baseline_scores) >= self.spec.baseline:
                self.baseline = sum(self._baseline_scores) / len(self._baseline_scores)
            return None
        self.recent.append(score)
        rolling = self.rolling
        if rolling is None or len(self.recent) < self.recent.maxlen:  # type: ignore[operator]
            return None
        if self.baseline - rolling > self.spec.allowed_drop(self.baseline):
            drift = Drift(rolling, self.baseline)
            self.recent.clear()
            return drift
        return None

    def start_over(self) -> None:
        """After an action that changes what the swarm sees (a flush): measure the baseline anew."""
        self._baseline_scores = []
        self.baseline = None
        self.recent.clear()
