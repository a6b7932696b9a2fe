"""`swarm-tui shadow`: judge the endpoint that carries the traffic against a baseline that a share
of it is mirrored to, the way the source article does when it migrates: `--primary` is the relay
it moved to (all traffic), `--secondary` the official endpoint (10% mirrored for 600 s); "118 ms
vs 184 ms P95, under the 2x rollback threshold -> adopt".

`run_shadow(config, on_update=...)` is the core, for the CLI and the TUI alike: `on_update`
receives a `ShadowReport` snapshot a few times a second and the final one at the end;
`ShadowRun.stop()` ends the traffic early (the report says so).

The package, one module per concern:
- `config`: the run's settings (`ShadowConfig`), their validation, which requests are mirrored,
  and the `--primary`/`--secondary` arguments turned into provider profiles;
- `run`: sending the workload to the primary, mirroring its share to the secondary;
- `measure`: what is measured of each endpoint, and how far the mirrored pairs' answers agree;
- `judging`: with `--judge`, which answer of each mirrored pair is better (positions balanced and
  mapped back, unreadable verdicts re-asked once, the judge billed apart);
- `verdict`: the decision (the primary judged, the secondary its baseline, the thresholds) and the
  records it is made on and written as (`EndpointReport`, `ShadowReport`);
- `report`: the text of a report (progress line, table) and shadow.json, credentials kept out.
This module re-exports the names the CLI, the TUI and the tests use.
"""

from swarm_tui.shadow.config import ShadowConfig, ShadowJudge, endpoint_name, endpoint_profile, mirrored, shadow_judge
from swarm_tui.shadow.judging import mapped
from swarm_tui.shadow.report import format_report, progress_line, safe_url, write_report
from swarm_tui.shadow.run import ShadowRun, run_shadow
from swarm_tui.shadow.verdict import (
    ADOPT,
    PENDING,
    ROLLBACK,
    EndpointReport,
    ShadowReport,
    decide,
    decide_judged,
    sign_test_p,
    verdict_meaning,
)

__all__ = [
    "ADOPT",
    "PENDING",
    "ROLLBACK",
    "EndpointReport",
    "ShadowConfig",
    "ShadowJudge",
    "ShadowReport",
    "ShadowRun",
    "decide",
    "decide_judged",
    "endpoint_name",
    "endpoint_profile",
    "format_report",
    "mapped",
    "mirrored",
    "progress_line",
    "run_shadow",
    "safe_url",
    "shadow_judge",
    "sign_test_p",
    "verdict_meaning",
    "write_report",
]
