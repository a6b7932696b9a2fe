"""The service tier in the console ("its price in the footer"): a run billed at Flex
says so on a footer line of its own, with the share of the cost each tier took; a run billed at
the default tier alone looks as before (the snapshots hold it byte for byte)."""

from __future__ import annotations

import json

from swarm_tui.config import Config
from swarm_tui.frontend.attached import AttachedRun
from swarm_tui.ui.app import make_app
from swarm_tui.ui.widgets.footer.stats_footer import StatsFooter

from tests.conftest import run_cli, write_batch
from tests.test_ui_app import wait_for
from tests.test_ui_batch_lane import footer_text


async def test_a_flex_run_says_its_tier_on_a_footer_line_of_its_own(tmp_path):
    job = write_batch(tmp_path / "job.jsonl", [f"task {i}" for i in range(8)], model="gpt-4.1")
    run_dir = tmp_path / "run"
    result = run_cli(
        "run", str(job), "--headless", "--provider", "sim", "--service-tier", "flex",
        "--sim-latency-ms", "5", "--sim-error-rate", "0", "--out", str(run_dir),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["cost_breakdown"]["by_tier"]["flex"] == summary["cost_usd"] > 0

    source = AttachedRun(run_dir)  # the journal replayed through the same figures a live run has
    app = make_app(source, config=Config(path=tmp_path / "config.toml"))
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: source.stats.done == 8, what="the journal to be replayed")
            await wait_for(
                pilot,
                lambda: app.query_one(StatsFooter).size.height == 4,
                what="the footer to grow a line for the tier",
            )
            lines = footer_text(app).splitlines()
            assert "tier flex" in [line.strip() for line in lines], lines
            assert source.stats.tier_label() == "flex"
    finally:
        await source.aclose()
