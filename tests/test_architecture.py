"""The rules of the code's shape, kept by tests: the engine, journal, pricing and simulator never
import Textual (docs/architecture.md, "Layers")."""

from __future__ import annotations

import subprocess
import sys

CORE_MODULES = [
    "swarm_tui.engine",
    "swarm_tui.journal",
    "swarm_tui.pricing",
    "swarm_tui.sim",
    "swarm_tui.run.session",
    "swarm_tui.frontend.headless",
    "swarm_tui.providers.client",
    "swarm_tui.jobs",
    "swarm_tui.pricing.currency",
    "swarm_tui.estimate",
    "swarm_tui.shadow",
    "swarm_tui.swarm.pipeline",
    "swarm_tui.frontend.attached",
    "swarm_tui.judge.judge",
    "swarm_tui.engine.lanes.batch",
    "swarm_tui.providers.wire",
    "swarm_tui.core.lanes",
]


def test_core_modules_do_not_import_textual():
    code = (
        "import sys, importlib\n"
        f"for name in {CORE_MODULES!r}: importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"textual imported by a core module: {out}"


# -- sizes: no module over 500 lines, no function over 80 (issue 26) ---------------------------
