"""The price table, cost accounting, the display currency and the cost fields of summary.json."""

from __future__ import annotations

import json
import tomllib
from importlib import resources

import pytest
from swarm_tui.config import load_config
from swarm_tui.core.errors import InputError
from swarm_tui.core.events import Attempt, RunStarted, TaskSucceeded
from swarm_tui.core.usage import Usage
from swarm_tui.engine.stats import RunStats
from swarm_tui.pricing import PriceTable, billable_output, cost_per_minute, projected_total
from swarm_tui.pricing.currency import display_currency, format_usd, from_config, resolve_currency

from tests.conftest import run_cli

ARTICLE_OUTPUT = {  # model: (relay, other relays' average), USD per 1M output tokens
    "gpt-4.1": (8.00, 11.40),
    "claude-sonnet-4.5": (15.00, 21.00),
    "gemini-2.5-flash": (2.50, 3.75),
    "deepseek-v3.2": (0.42, 0.65),
}


def test_the_table_has_the_articles_relay_prices_and_the_official_ones_dated_and_sourced():
    table = PriceTable.builtin()
    for model, (relay, average) in ARTICLE_OUTPUT.items():
        assert table.lookup(model, "holysheep").output == relay
        assert table.lookup(model, "relay-avg").output == average
        official = table.lookup(model, "official")
        assert official is not None and official.cached_input < official.input
        assert official.source.startswith("https://") and official.as_of
    assert table.lookup("gpt-4.1").output == 8.00 and table.lookup("gpt-4.1").input == 2.00
    assert table.lookup("claude-sonnet-4.5").input == 3.00
    assert table.billing_rate("holysheep", "CNY") == 1.0  # the article's ¥1 = $1
    assert table.billing_rate("official", "CNY") is None
    doc = tomllib.loads(resources.files("swarm_tui").joinpath("prices.toml").read_text(encoding="utf-8"))
    assert doc["meta"]["updated"] == table.updated and table.updated
    assert all(row.get("source") for key, row in doc.items() if "/" in key)


def test_a_model_without_a_price_is_unknown_never_zero():
    table = PriceTable.builtin()
    assert table.lookup("sim-1") is None
    assert table.lookup(None) is None
    assert resolve_currency("CNY").format(None) == "price unknown"
    assert format_usd(None) == "price unknown"


def test_names_resolve_through_aliases_dates_and_vendor_prefixes_and_unknown_providers_pay_official():
    table = PriceTable.builtin()
    assert table.canonical("gpt-4.1-2025-04-14") == "gpt-4.1"
    assert table.canonical("openai/gpt-4.1") == "gpt-4.1"
    assert table.canonical("claude-sonnet-4-5-20250929") == "claude-sonnet-4.5"
    assert table.canonical("deepseek-chat") == "deepseek-v3.2"
    assert table.canonical("gpt-4.1-mini") == "gpt-4.1-mini"  # not folded into gpt-4.1
    assert table.lookup("gpt-4.1", "my-own-profile") == table.lookup("gpt-4.1", "official")
    assert table.lookup("gpt-4.1", "relay-avg/fallback") == table.lookup("gpt-4.1", "relay-avg")


def test_cached_tokens_cost_the_cached_rate_and_reasoning_is_not_billed_twice():
    price = PriceTable.builtin().lookup("gpt-4.1")  # 2.00 / 0.50 / 8.00
    usage = Usage(prompt=1_000_000, completion=1_000_000, cached=600_000)
    assert price.cost(usage) == pytest.approx(0.4 * 2.00 + 0.6 * 0.50 + 8.00)
    parts = price.breakdown(usage)
    assert parts.total_usd == pytest.approx(price.cost(usage))
    assert parts.cached_savings_usd == pytest.approx(0.6 * 1.50)
    # OpenAI counts reasoning inside completion_tokens: 300 of the 1M output are reasoning
    with_reasoning = Usage(prompt=1_000_000, completion=1_000_000, cached=600_000, reasoning=300_000)
    assert price.cost(with_reasoning) == pytest.approx(price.cost(usage))
    # a provider reporting more reasoning than completion tokens counts them apart: bill both
    apart = Usage(completion=100, reasoning=400)
    assert billable_output(apart) == 500


def test_config_overrides_prices_and_bad_rows_fail_with_the_field(tmp_path, monkeypatch):
    path = tmp_path / "config" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        '[defaults]\ncurrency = "JPY"\ncurrency_rate = 150\n\n'
        '[prices."holysheep/kimi-k2.5"]\ninput = 0.5\ncached_input = 0.05\noutput = 2.5\n\n'
        '[prices."official/gpt-4.1"]\noutput = 7.0\n\n'
        '[prices."myrelay/my-model"]\ninput = 1\noutput = 2\n\n'
        "[billing.myrelay]\nJPY = 100\n",
        encoding="utf-8",
    )
    config = load_config(path)
    table = PriceTable.builtin(config.prices, billing=config.billing)
    assert table.lookup("kimi-k2.5", "holysheep").output == 2.5
    assert table.lookup("kimi-k2.5", "official").output == 3.00  # untouched
    gpt = table.lookup("gpt-4.1")
    assert (gpt.input, gpt.cached_input, gpt.output) == (2.00, 0.50, 7.0)  # only output overridden
    assert table.lookup("my-model", "myrelay").cached_input == 1.0  # defaults to input
    currency = from_config(config)
    assert (currency.code, currency.rate) == ("JPY", 150)
    assert display_currency(config, "myrelay").rate == 100
    assert currency.format(12.34) == "$12.34 ≈ ¥1,851"

    path.write_text('[prices."x/new-model"]\ninput = 1.0\n', encoding="utf-8")
    with pytest.raises(InputError, match=r'prices\."x/new-model"\.output: missing'):
        load_config(path)
    path.write_text('[prices."x/new-model"]\ninput = -1\noutput = 1\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"input: must be a number >= 0"):
        load_config(path)
    path.write_text('[defaults]\ncurrency = "XYZ"\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"defaults.currency_rate: no reference rate for XYZ"):
        load_config(path)
    monkeypatch.setenv("SWARM_TUI_CONFIG", str(path))
    result = run_cli("estimate")
    assert result.returncode == 2 and "defaults.currency_rate" in result.stderr


def test_money_is_shown_in_usd_and_the_display_currency():
    assert resolve_currency("CNY", 7.3).format(12.34) == "$12.34 ≈ ¥90.08"
    assert resolve_currency("CNY", 1.0).format(2457.6) == "$2,457.60 ≈ ¥2,457.60"
    assert resolve_currency("USD").format(2457.6) == "$2,457.60"
    assert resolve_currency("EUR", 0.9).format(0.0123) == "$0.0123 ≈ €0.0111"
    assert resolve_currency("JPY").rate == 150.0
    assert resolve_currency("XYZ", 3).format(1) == "$1.00 ≈ XYZ 3.00"
    with pytest.raises(InputError, match="no reference rate for XYZ"):
        resolve_currency("XYZ")
    with pytest.raises(InputError, match="positive number"):
        resolve_currency("CNY", 0)
    billed = resolve_currency("CNY", 7.3).for_provider(PriceTable.builtin(), "holysheep")
    assert billed.rate == 1.0 and billed.rate_text() == "¥1 = $1" and "holysheep" in billed.basis


def test_run_stats_give_cost_per_minute_and_a_projected_total():
    now = [0.0]
    stats = RunStats(clock=lambda: now[0])
    stats.observe(RunStarted(total=10, pending=10, concurrency=5, provider="p", simulated=True))
    assert stats.cost_per_min_usd is None and stats.projected_cost_usd is None
    for i in range(4):
        now[0] = 30.0 * (i + 1)
        stats.observe(TaskSucceeded(Attempt(i, 1, "p", 0.0, 100.0, "ok", cost_usd=0.25), content=""))
    assert stats.cost_usd == pytest.approx(1.0)
    assert stats.cost_per_min_usd == pytest.approx(0.5)  # $1 in 120 s
    assert stats.projected_cost_usd == pytest.approx(2.5)  # 4 of 10 tasks cost $1
    assert cost_per_minute(None, 60) is None and projected_total(None, 1, 1) is None
    assert projected_total(3.0, 0, 5) is None and projected_total(3.0, 5, 0) == 3.0


SHARED = "You are sub-agent of a swarm. Shared context follows. " + "The quick brown fox jumps over the lazy dog. " * 40


def _cached_job(path, n: int, model: str):
    lines = [
        json.dumps(
            {
                "custom_id": f"t{i}",
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": {
                    "model": model,
                    "max_tokens": 64,
                    "messages": [{"role": "system", "content": SHARED}, {"role": "user", "content": f"task {i}"}],
                },
            }
        )
        for i in range(n)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_runs_summary_prices_cached_tokens_below_full_input(tmp_path, sim):
    config = tmp_path / "config" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[defaults]\ncurrency = "CNY"\ncurrency_rate = 7.3\n', encoding="utf-8")
    job = _cached_job(tmp_path / "job.jsonl", 30, "gpt-4.1")
    result = run_cli(
        "run", str(job), "--headless", "--base-url", sim.base_url, "--concurrency", "1", "--out", str(tmp_path / "run")
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    tokens = summary["tokens"]
    assert tokens["cached"] > 0.5 * tokens["prompt"], "the shared prefix was served from the cache"
    price = PriceTable.builtin().lookup("gpt-4.1")
    billed = Usage(prompt=tokens["prompt"], completion=tokens["completion"], cached=tokens["cached"])
    full_input = Usage(prompt=tokens["prompt"], completion=tokens["completion"])
    assert summary["cost_usd"] == pytest.approx(price.cost(billed), abs=1e-6)
    assert summary["cost_usd"] < price.cost(full_input)
    parts = summary["cost_breakdown"]
    assert parts["cached_input_usd"] == pytest.approx(tokens["cached"] * 0.50 / 1e6, abs=1e-6)
    assert parts["cached_input_usd"] < tokens["cached"] * 2.00 / 1e6
    assert parts["cached_savings_usd"] == pytest.approx(tokens["cached"] * 1.50 / 1e6, abs=1e-6)
    assert parts["input_usd"] + parts["cached_input_usd"] + parts["output_usd"] == pytest.approx(
        summary["cost_usd"], abs=1e-5
    )
    assert parts["by_endpoint"]["custom"]["price"]["output"] == 8.00
    assert summary["cost_per_min_usd"] == pytest.approx(summary["cost_usd"] * 60 / summary["makespan_s"], rel=1e-3)
    assert summary["cost_projected_usd"] == pytest.approx(summary["cost_usd"])
    assert summary["cost_display"].startswith("$") and "≈ ¥" in summary["cost_display"]
    assert parts["currency"]["rate"] == 7.3
    assert parts["currency"]["amount"] == pytest.approx(summary["cost_usd"] * 7.3, abs=1e-6)


def test_a_run_on_a_model_without_a_price_says_so_in_its_summary(tmp_path, sim):
    job = _cached_job(tmp_path / "job.jsonl", 3, "sim-1")
    result = run_cli("run", str(job), "--headless", "--base-url", sim.base_url, "--out", str(tmp_path / "run"))
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["cost_usd"] is None and summary["cost_per_min_usd"] is None
    assert "price unknown" in summary["cost_display"] and "$0" not in summary["cost_display"]
    assert "price unknown" in result.stderr


def test_the_elapsed_clock_counts_run_time_not_the_idle_gap_before_a_restart():
    from swarm_tui.core.events import RunFinished, RunStarted
    from swarm_tui.engine.stats import RunStats

    now = [100.0]
    stats = RunStats(clock=lambda: now[0])
    stats.observe(RunStarted(10, 10, 5, "sim", True))
    now[0] = 130.0
    stats.observe(RunFinished(9, 1, 0, aborted=False))
    now[0] = 500.0  # the user reads the screen for a while, then retries the failed agent (`r`)
    stats.observe(RunStarted(10, 1, 5, "sim", True))
    now[0] = 505.0
    assert stats.elapsed_s == 35.0


# --------------------------------------------------------------------------- batch rates


def test_a_rows_batch_rate_is_the_price_of_a_batch_lane_attempt():
    table = PriceTable.builtin()
    gpt = table.lookup("gpt-4.1")  # OpenAI: batch = 50% of input and output
    batch = gpt.batch_price()
    assert (batch.input, batch.output) == (1.00, 4.00)
    assert batch.cached_input == 0.50  # no batch cached rate published: the cached one, capped at batch input
    assert "batch" in batch.source and batch.batch_price() is None
    claude = table.lookup("claude-sonnet-4.5").batch_price()
    assert (claude.input, claude.cached_input, claude.output) == (1.50, 0.15, 7.50)
    kimi = table.lookup("kimi-k2.5").batch_price()  # Moonshot: 60% of the standard price
    assert (kimi.input, kimi.cached_input, kimi.output) == pytest.approx((0.36, 0.06, 1.80))
    usage = Usage(prompt=1_000_000, completion=1_000_000, cached=400_000)
    assert batch.cost(usage) == pytest.approx(0.6 * 1.00 + 0.4 * 0.50 + 4.00)
    assert gpt.to_dict()["batch_output"] == 4.00
    doc = tomllib.loads(resources.files("swarm_tui").joinpath("prices.toml").read_text(encoding="utf-8"))
    for key, row in doc.items():  # every published batch rate names its page
        if "/" in key and "batch_input" in row:
            assert "batch: https://" in row["source"], key


def test_no_published_batch_rate_is_none():
    table = PriceTable.builtin()
    assert table.lookup("deepseek-v3.2").batch_price() is None  # DeepSeek has no Batch API
    assert table.lookup("gpt-4.1", "holysheep").batch_price() is None  # the relay publishes none
    assert table.lookup("gpt-4.1", "relay-avg").batch_price() is None
    assert table.lookup("sim-1", "sim") is None  # no price at all
    assert table.lookup("gpt-4.1").to_dict()["batch_input"] == 1.00
    assert table.lookup("deepseek-v3.2").to_dict()["batch_input"] is None


def test_a_provider_rule_gives_every_row_it_bills_a_batch_rate_the_simulator_half():
    table = PriceTable.builtin()
    assert table.batch_rule("sim")[0] == 0.5 and table.batch_rule("sim/batch")[0] == 0.5
    assert table.batch_rule("holysheep") is None
    for model in ("kimi-k2.5", "deepseek-v3.2", "gpt-4.1"):  # the sim pays the official list price
        live = table.lookup(model, "sim")
        assert (live.input, live.output) == (table.lookup(model).input, table.lookup(model).output)
        batch = live.batch_price()
        assert batch is not None, model
        assert (batch.input, batch.cached_input, batch.output) == pytest.approx(
            (live.input / 2, live.cached_input / 2, live.output / 2)
        )
        assert "simulator" in batch.source
    # a provider's own row with no batch rate takes the rule; one with its own rate keeps it
    rule_table = PriceTable.builtin(
        {
            "sim/gpt-4.1": {"input": 1.0, "output": 2.0},
            "sim/kimi-k2.5": {"input": 1.0, "output": 2.0, "batch_input": 0.7, "batch_output": 0.9},
        }
    )
    assert rule_table.lookup("gpt-4.1", "sim").batch_price().output == 1.0
    assert rule_table.lookup("kimi-k2.5", "sim").batch_price().output == 0.9
    assert [o.price.batch_price().output for o in rule_table.offers("gpt-4.1") if o.provider == "sim"] == [1.0]


def test_config_batch_rates_are_validated_like_the_others(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text(
        '[prices."myrelay/my-model"]\ninput = 1\noutput = 2\nbatch_input = 0.4\nbatch_output = 0.8\n\n'
        '[prices."official/gpt-4.1"]\nbatch_output = 3.5\n\n'
        '[prices."official/deepseek-v3.2"]\nbatch_input = 0.1\nbatch_cached_input = 0.01\n'
        "batch_output = 0.2\n",
        encoding="utf-8",
    )
    config = load_config(path)
    table = PriceTable.builtin(config.prices, billing=config.billing, source=config.path)
    mine = table.lookup("my-model", "myrelay").batch_price()
    assert (mine.input, mine.cached_input, mine.output) == (0.4, 0.4, 0.8)
    gpt = table.lookup("gpt-4.1").batch_price()
    assert (gpt.input, gpt.output) == (1.00, 3.5)  # only batch_output overridden
    deepseek = table.lookup("deepseek-v3.2").batch_price()
    assert (deepseek.input, deepseek.cached_input, deepseek.output) == (0.1, 0.01, 0.2)

    path.write_text('[prices."official/gpt-4.1"]\nbatch_output = -1\n', encoding="utf-8")
    with pytest.raises(InputError, match=r'prices\."official/gpt-4.1"\.batch_output: must be a number >= 0'):
        load_config(path)
    path.write_text('[prices."official/gpt-4.1"]\nbatch_input = "half"\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"batch_input: must be a number >= 0"):
        load_config(path)
    path.write_text('[prices."official/deepseek-v3.2"]\nbatch_input = 0.1\n', encoding="utf-8")
    with pytest.raises(InputError, match=r'prices\."official/deepseek-v3.2"\.batch_output: missing'):
        load_config(path)
    path.write_text('[prices."official/gpt-4.1"]\nbatch_rate = 0.5\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"batch_rate: unknown field \(known: .*batch_cached_input"):
        load_config(path)


class _Journal:
    """What `summary_cost_fields` reads of a journal: its history part."""

    def __init__(self, attempts):
        self.queries = self.history = self
        self._attempts = attempts

    def attempts_since(self, _seq):
        return iter(self._attempts)

    def has_log(self):  # rows alone, as a journal of schema 1 keeps them
        return False


def test_batch_lane_attempts_are_billed_at_the_batch_rate_and_split_by_lane():
    from swarm_tui.core.lanes import lane_of
    from swarm_tui.engine import EngineSettings
    from swarm_tui.providers.profile import ProviderProfile
    from swarm_tui.records import RunPlan
    from swarm_tui.run.cost import run_cost_details, summary_cost_fields

    assert lane_of("sim/batch") == "batch" and lane_of("holysheep/batch") == "batch"
    assert lane_of("sim") == "live" and lane_of("sim/fallback") == "live" and lane_of(None) == "live"
    table = PriceTable.builtin()
    live, batch = table.lookup("kimi-k2.5", "sim"), table.lookup("kimi-k2.5", "sim").batch_price()
    ok = Usage(prompt=1_000, completion=500, cached=200)

    def attempt(endpoint, outcome="ok", price=None):
        price = price or (batch if endpoint.endswith("/batch") else live)
        return {
            "endpoint": endpoint,
            "outcome": outcome,
            "prompt_tokens": ok.prompt,
            "completion_tokens": ok.completion,
            "cached_tokens": ok.cached,
            "cost_usd": price.cost(ok),
        }

    attempts = [
        attempt("sim"),
        attempt("sim", "rate_limited"),
        attempt("sim/batch"),
        attempt("sim/batch"),
        attempt("sim/batch"),
        {"endpoint": "sim/batch", "outcome": "expired", "cost_usd": None},
    ]
    summary = summary_cost_fields(
        _Journal(attempts),
        RunPlan(ProviderProfile("sim"), EngineSettings(), model="kimi-k2.5"),
        cost_usd=sum(a["cost_usd"] or 0 for a in attempts),
        makespan_s=10.0,
        finished=5,
        unfinished=0,
        currency=resolve_currency("USD"),
    ).to_json()
    details = summary["cost_breakdown"]
    assert details["by_lane"]["live"] == pytest.approx(2 * live.cost(ok), abs=1e-6)
    assert details["by_lane"]["batch"] == pytest.approx(3 * batch.cost(ok), abs=1e-6)
    per_live_attempt = details["by_lane"]["live"] / 2
    assert details["by_lane"]["batch"] == pytest.approx(3 * per_live_attempt / 2, abs=1e-6)  # the sim: half price
    assert details["by_endpoint"]["sim/batch"]["price"]["output"] == pytest.approx(1.50)  # 50% of 3.00
    assert details["by_endpoint"]["sim"]["price"]["output"] == 3.00
    assert details["input_usd"] + details["cached_input_usd"] + details["output_usd"] == pytest.approx(
        sum(details["by_lane"].values()), abs=1e-5
    )
    # a batch-lane endpoint of a provider with no batch rate is priced at the live rate (as the lane bills it)
    no_rate = run_cost_details(
        [attempt("holysheep/batch", price=table.lookup("gpt-4.1", "holysheep"))],
        lambda e: table.lookup("gpt-4.1", "holysheep"),
    )
    assert no_rate["by_lane"] == {"live": 0.0, "batch": pytest.approx(table.lookup("gpt-4.1", "holysheep").cost(ok))}
    summary = summary_cost_fields(
        _Journal([attempt("holysheep/batch", price=table.lookup("gpt-4.1", "holysheep"))]),
        RunPlan(ProviderProfile("holysheep"), EngineSettings(), model="gpt-4.1"),
        cost_usd=1.0,
        makespan_s=1.0,
        finished=1,
        unfinished=0,
        currency=resolve_currency("USD"),
    ).to_json()
    assert summary["cost_breakdown"]["by_endpoint"]["holysheep/batch"]["price"]["output"] == 8.00
