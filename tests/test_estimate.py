"""`swarm-tui estimate`: the article's ROI scenario, side-by-side rows, currencies, --from-run, bad input."""

from __future__ import annotations

import json

import pytest
from swarm_tui.cli import main
from swarm_tui.estimate import Scenario, build_estimate, format_table, measure_run, scenario_from_run
from swarm_tui.pricing.currency import resolve_currency

from tests.conftest import run_cli
from tests.helpers import open_session

ARTICLE = ["--agents", "100", "--tasks-per-day", "50", "--output-tokens", "2048", "--days", "30"]


def _row(lines: list[str], model: str, *words: str) -> str:
    """The one line of `model`'s block (its name heads its rows) that holds every word."""
    start = lines.index(model) + 1
    end = lines.index("", start) if "" in lines[start:] else len(lines)
    matches = [line for line in lines[start:end] if all(w in line.split() for w in words)]
    assert len(matches) == 1, (model, words, lines)
    return matches[0]


def test_the_articles_scenario_is_307_2m_output_tokens_and_2457_60_for_gpt_4_1():
    result = run_cli("estimate", *ARTICLE, "--model", "gpt-4.1")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "Tokens: 0 input (0 cached) + 307.2M output" in result.stdout
    relay = _row(lines, "gpt-4.1", "holysheep", "live", "default")
    assert "8.00" in relay.split() and "$2,457.60" in relay.split()
    assert relay.split()[-1] == "29.8%"  # saved against the other relays' average ($1,044.48: --json)
    average = _row(lines, "gpt-4.1", "relay-avg")
    assert "$3,502.08" in average.split() and average.split()[-1] == "priciest"
    # CNY (the config default): the relay bills ¥1 = $1, the official rate is ¥7.3 = $1
    assert "¥2,457.60*" in relay.split()
    assert "¥17,940.48" in _row(lines, "gpt-4.1", "official", "default").split()


def test_the_estimate_in_process_gives_exact_figures():
    estimate = build_estimate(
        Scenario(agents=100, tasks_per_day=50, output_tokens=2048, days=30),
        models=["gpt-4.1"],
        currency=resolve_currency("USD"),
    )
    assert estimate.usage.completion == 307_200_000 and estimate.usage.prompt == 0
    by_provider = {row.provider: row for row in estimate.rows}
    assert by_provider["holysheep"].cost_usd == pytest.approx(2457.60)
    assert by_provider["relay-avg"].cost_usd == pytest.approx(3502.08)
    assert by_provider["holysheep"].saving_usd == pytest.approx(1044.48)
    assert by_provider["relay-avg"].priciest and by_provider["relay-avg"].saving_usd == 0
    assert estimate.rows[0].cost_usd <= estimate.rows[-1].cost_usd  # cheapest first
    assert "cost CNY" not in format_table(estimate)  # USD only


def test_all_models_as_json_put_every_provider_side_by_side():
    result = run_cli("estimate", *ARTICLE, "--all-models", "--json", "--currency", "JPY", "--rate", "150")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["tokens"]["output"] == 307_200_000
    rows = {(r["model"], r["provider"]): r for r in data["rows"]}
    expected = {
        "gpt-4.1": (8.00, 11.40),
        "claude-sonnet-4.5": (15.00, 21.00),
        "gemini-2.5-flash": (2.50, 3.75),
        "deepseek-v3.2": (0.42, 0.65),
    }
    for model, (relay, average) in expected.items():
        cheap, dear = rows[(model, "holysheep")], rows[(model, "relay-avg")]
        assert cheap["cost_usd"] == pytest.approx(307.2 * relay, abs=0.01)
        assert dear["cost_usd"] == pytest.approx(307.2 * average, abs=0.01)
        assert cheap["saving_usd"] == pytest.approx(dear["cost_usd"] - cheap["cost_usd"], abs=0.01)
        assert cheap["display"]["amount"] == pytest.approx(307.2 * relay * 150, abs=0.01)
        assert (model, "official") in rows
    assert data["priciest"] == {"model": "claude-sonnet-4.5", "provider": "relay-avg", "cost_usd": 6451.2}
    assert data["cheapest"]["model"] == "deepseek-v3.2"


def test_cached_input_is_cheaper_than_uncached_input():
    base = Scenario(input_tokens=4000, output_tokens=500)
    cold = build_estimate(base, models=["deepseek-v3.2"], providers=["official"]).rows[0]
    warm = build_estimate(
        Scenario(input_tokens=4000, output_tokens=500, cached_share=0.75),
        models=["deepseek-v3.2"],
        providers=["official"],
    ).rows[0]
    tasks = 100 * 50 * 30
    assert cold.cost_usd == pytest.approx(tasks * (4000 * 0.28 + 500 * 0.42) / 1e6)
    assert warm.cost_usd == pytest.approx(tasks * (1000 * 0.28 + 3000 * 0.028 + 500 * 0.42) / 1e6)


async def test_from_run_takes_the_per_task_tokens_a_run_measured(tmp_path, sim):
    session = open_session(tmp_path, sim.base_url, [f"task {i} " + "word " * (i * 10) for i in range(12)])
    try:
        await session.run()
    finally:
        await session.aclose()
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    measured = measure_run(tmp_path / "run")
    assert measured.finished_tasks == 12
    assert measured.input_tokens == pytest.approx(summary["tokens"]["prompt"] / 12)
    assert measured.output_tokens == pytest.approx(summary["tokens"]["completion"] / 12)
    scenario = scenario_from_run(measured, Scenario(agents=10), output_tokens=1000)
    assert scenario.agents == 10 and scenario.output_tokens == 1000  # an explicit flag wins
    assert scenario.input_tokens == pytest.approx(measured.input_tokens)

    result = run_cli("estimate", "--from-run", str(tmp_path / "run"), "--model", "gpt-4.1", "--agents", "10", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["scenario"]["measured_from"] == str(tmp_path / "run")
    assert data["tokens"]["input"] == round(10 * 50 * 30 * summary["tokens"]["prompt"] / 12)
    assert data["tokens"]["output"] == round(10 * 50 * 30 * summary["tokens"]["completion"] / 12)

    (tmp_path / "run" / "journal.sqlite").rename(tmp_path / "moved.sqlite")  # summary.json alone will do
    assert measure_run(tmp_path / "run").output_tokens == pytest.approx(measured.output_tokens)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--model", "gpt-9"], "known models: claude-sonnet-4.5, deepseek-v3.2"),
        (["--cached-share", "1.5"], "--cached-share"),
        (["--agents", "0"], "--agents"),
        (["--output-tokens", "-5"], "--output-tokens"),
        (["--model", "gpt-4.1", "--all-models"], "not allowed with"),
        (["--currency", "XYZ"], "no reference rate for XYZ"),
        (["--provider", "nobody"], "known: holysheep, official, relay-avg"),
        (["--from-run", "/nonexistent/run"], "not a run directory"),
    ],
)
def test_bad_input_exits_2_with_a_clear_message(argv, message, capsys):
    try:
        code = main(["estimate", *argv])
    except SystemExit as exc:  # argparse's own checks
        code = exc.code
    assert code == 2
    assert message in capsys.readouterr().err


def test_a_live_runs_usage_gives_the_per_task_tokens():
    from swarm_tui.core.usage import Usage
    from swarm_tui.estimate import scenario_from_usage

    scenario = scenario_from_usage(Usage(prompt=4000, completion=1000, cached=3000), 10, Scenario(agents=5))
    assert (scenario.agents, scenario.input_tokens, scenario.output_tokens, scenario.cached_share) == (
        5,
        400,
        100,
        0.75,
    )
    with pytest.raises(Exception, match="no finished task"):
        scenario_from_usage(Usage(), 0)


def test_the_batch_column_prices_the_batch_lane_and_its_saving():
    estimate = build_estimate(
        Scenario(agents=100, tasks_per_day=50, output_tokens=2048, days=30),
        models=["gpt-4.1", "deepseek-v3.2"],
        currency=resolve_currency("USD"),
    )
    rows = {(row.model, row.provider): row for row in estimate.rows}
    official = rows[("gpt-4.1", "official")]
    assert official.batch_cost_usd == pytest.approx(1228.80)  # 307.2M output x $4.00 (50% of $8.00)
    assert official.batch_saving_usd == pytest.approx(1228.80) and official.batch_saving_share == pytest.approx(0.5)
    relay = rows[("gpt-4.1", "holysheep")]
    assert relay.batch_cost_usd is None and relay.batch_saving_usd is None  # the relay publishes no batch rate
    assert rows[("deepseek-v3.2", "official")].batch_cost_usd is None
    lines = format_table(estimate).splitlines()  # the batch lane is a row of its own: lane batch
    assert any(line.split()[:3] == ["provider", "lane", "tier"] for line in lines)
    batch = _row(lines, "gpt-4.1", "official", "batch")
    assert batch.split()[-4:] == ["1.00", "4.00", "$1,228.80", "64.9%"]  # 64.9% below relay-avg's $3,502.08
    assert not [line for line in lines if "batch" in line.split() and line.split()[0] in ("holysheep", "relay-avg")]
    assert not [line for line in lines if line.split()[:2] == ["official", "batch"] and "0.42" in line.split()]

    cached = build_estimate(
        Scenario(input_tokens=4000, output_tokens=500, cached_share=0.75),
        models=["claude-sonnet-4.5"],
        providers=["official"],
    ).rows[0]
    tasks = 100 * 50 * 30  # Anthropic: cache reads stack with the batch discount (0.1x the batch input)
    assert cached.batch_cost_usd == pytest.approx(tasks * (1000 * 1.50 + 3000 * 0.15 + 500 * 7.50) / 1e6)


def test_the_json_gives_the_batch_cost_and_saving_per_row():
    result = run_cli("estimate", *ARTICLE, "--model", "gpt-4.1", "--model", "kimi-k2.5", "--json")
    assert result.returncode == 0, result.stderr
    rows = {(r["model"], r["provider"]): r for r in json.loads(result.stdout)["rows"]}
    official = rows[("gpt-4.1", "official")]
    assert official["batch_cost_usd"] == 1228.8 and official["batch_saving_usd"] == 1228.8
    assert official["batch_saving_share"] == 0.5 and official["price"]["batch_output"] == 4.0
    kimi = rows[("kimi-k2.5", "official")]  # Moonshot: 60% of the standard price
    assert kimi["batch_cost_usd"] == pytest.approx(307.2 * 1.80, abs=0.01) and kimi["batch_saving_share"] == 0.4
    relay = rows[("gpt-4.1", "holysheep")]
    assert relay["batch_cost_usd"] is None and relay["batch_saving_usd"] is None and relay["batch_saving_share"] is None
    assert relay["price"]["batch_input"] is None


# One row per way a provider bills the tokens: lane (live, batch) and tier (default, flex,
# priority), within 80 columns. GPT-5's Flex is billed at its Batch API rates
# (https://platform.openai.com/docs/guides/flex-processing: "priced at Batch API rates"); its
# Priority tier at $2.50 / $20.00 (https://platform.openai.com/docs/pricing, Priority processing).
@pytest.mark.parametrize(
    "argv",
    [
        ["--all-models"],
        ["--all-models", "--input-tokens", "3000", "--cached-share", "0.5", "--currency", "JPY", "--rate", "150"],
    ],
    ids=["article-cny", "with-input-jpy"],
)
def test_the_estimate_has_lane_and_tier_columns_within_80_columns(argv):
    result = run_cli("estimate", *ARTICLE, *argv)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(map(len, lines)) <= 80, max(lines, key=len)
    header = next(line for line in lines if line.split()[:4] == ["provider", "lane", "tier", "in/1M"])
    assert header.split()[-1] == "saving"
    flex = _row(lines, "gpt-5", "official", "live", "flex")
    default = _row(lines, "gpt-5", "official", "live", "default")
    batch = _row(lines, "gpt-5", "official", "batch")
    priority = _row(lines, "gpt-5", "official", "live", "priority")
    assert flex.split()[-4] == batch.split()[-4]  # flex at the batch price, per 1M output: $5.00
    usd = {
        name: float(line.split()[-3].strip("$").replace(",", ""))
        for name, line in (("default", default), ("flex", flex), ("priority", priority))
    }
    assert usd["flex"] == pytest.approx(usd["default"] / 2, abs=0.01)
    assert usd["priority"] == pytest.approx(usd["default"] * 2, abs=0.02)  # each rounded to the cent


def test_the_json_gives_each_rows_cost_per_tier_and_a_long_context_rule_is_judged_per_task():
    estimate = build_estimate(
        Scenario(agents=100, tasks_per_day=50, output_tokens=2048, days=30),
        models=["gpt-5"],
        providers=["official"],
        currency=resolve_currency("USD"),
    )
    tiers = estimate.rows[0].to_dict()["tier_costs_usd"]
    assert tiers == {"default": 3072.0, "flex": 1536.0, "priority": 6144.0, "batch": 1536.0}
    # 250k-token prompts on Claude Sonnet 4.5: above its 200k threshold, each task is priced wholly at
    # the premium (2x input, 1.5x output); 150k-token prompts are not, though the month adds up to more
    small = build_estimate(
        Scenario(agents=1, tasks_per_day=1, days=1, input_tokens=150_000, output_tokens=1000),
        models=["claude-sonnet-4.5"],
        providers=["official"],
    ).rows[0]
    large = build_estimate(
        Scenario(agents=1, tasks_per_day=1, days=1, input_tokens=250_000, output_tokens=1000),
        models=["claude-sonnet-4.5"],
        providers=["official"],
    ).rows[0]
    assert small.cost_usd == pytest.approx((150_000 * 3.00 + 1000 * 15.00) / 1e6)
    assert large.cost_usd == pytest.approx((250_000 * 6.00 + 1000 * 22.50) / 1e6)
    month = build_estimate(
        Scenario(agents=10, tasks_per_day=10, days=30, input_tokens=150_000, output_tokens=1000),
        models=["claude-sonnet-4.5"],
        providers=["official"],
    ).rows[0]
    assert month.cost_usd == pytest.approx(3000 * small.cost_usd)
