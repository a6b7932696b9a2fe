"""The bill, rule by rule: a usage priced exactly as the provider's page says, usage read
as each provider reports it (over real HTTP), the service tiers on the simulator, profiles and
price rows that say all of it, and old rows that still load.

Each bill row names the page its rule comes from. Prices are the built-in table's (USD per 1M
tokens); where the table cannot know a rate, the row brings its own (a user's config row).
"""

from __future__ import annotations

import json

import pytest
from aiohttp import web
from swarm_tui.config import load_config
from swarm_tui.core.errors import InputError
from swarm_tui.core.usage import Usage
from swarm_tui.journal import Journal
from swarm_tui.pricing import PriceTable, billable_output
from swarm_tui.providers.client import ProviderClient
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.sim import SimConfig
from swarm_tui.sim.core import Simulator

from tests.conftest import read_jsonl, run_cli, write_batch
from tests.helpers import attempts_of

M = 1_000_000
TABLE = PriceTable.builtin()

# (model, provider, tier, usage, expected USD): one row per rule
BILLS = [
    # https://docs.claude.com/en/docs/about-claude/pricing#long-context-pricing: over 200K input tokens
    # the whole request is billed at $6 input / $22.50 output, not only the tokens past 200K
    pytest.param(
        "claude-sonnet-4.5",
        "official",
        None,
        Usage(prompt=250_000, completion=2_000),
        (250_000 * 6.00 + 2_000 * 22.50) / M,
        id="anthropic-250k-prompt-wholly-at-the-premium",
    ),
    pytest.param(
        "claude-sonnet-4.5",
        "official",
        None,
        Usage(prompt=200_000, completion=2_000),
        (200_000 * 3.00 + 2_000 * 15.00) / M,
        id="anthropic-200k-exactly-is-standard",
    ),
    # ... and the 200K counts cache reads and writes: 10k uncached + 240k read is over it
    pytest.param(
        "claude-sonnet-4.5",
        "official",
        None,
        Usage(prompt=250_000, completion=1_000, cached=240_000),
        (10_000 * 6.00 + 240_000 * 0.60 + 1_000 * 22.50) / M,
        id="anthropic-long-context-counts-the-cache",
    ),
    # https://docs.claude.com/en/docs/build-with-claude/prompt-caching#pricing: 5-minute write 1.25x,
    # 1-hour write 2x, read 0.1x of the $3.00 input
    pytest.param(
        "claude-sonnet-4.5",
        "official",
        None,
        Usage(prompt=10_000, cache_write=10_000),
        10_000 * 3.75 / M,
        id="anthropic-5-minute-cache-write-at-1.25x",
    ),
    pytest.param(
        "claude-sonnet-4.5",
        "official",
        None,
        Usage(prompt=10_000, cache_write_1h=10_000),
        10_000 * 6.00 / M,
        id="anthropic-1-hour-cache-write-at-2x",
    ),
    pytest.param(
        "claude-sonnet-4.5",
        "official",
        None,
        Usage(prompt=10_000, cached=10_000),
        10_000 * 0.30 / M,
        id="anthropic-cache-read-at-0.1x",
    ),
    pytest.param(
        "claude-sonnet-4.5",
        "official",
        None,
        Usage(prompt=20_000, completion=100, cached=8_000, cache_write=4_000, cache_write_1h=2_000),
        (6_000 * 3.00 + 8_000 * 0.30 + 4_000 * 3.75 + 2_000 * 6.00 + 100 * 15.00) / M,
        id="anthropic-reads-writes-and-misses-in-one-request",
    ),
    # https://docs.claude.com/en/docs/build-with-claude/batch-processing: 50% of every rate, the
    # long-context premium included
    pytest.param(
        "claude-sonnet-4.5",
        "official",
        "batch",
        Usage(prompt=250_000, completion=2_000),
        (250_000 * 3.00 + 2_000 * 11.25) / M,
        id="anthropic-batch-of-a-long-prompt",
    ),
    # https://ai.google.dev/gemini-api/docs/pricing: Gemini 2.5 Pro, prompts > 200k tokens $2.50 / $15.00
    pytest.param(
        "gemini-2.5-pro",
        "official",
        None,
        Usage(prompt=250_000, completion=1_000),
        (250_000 * 2.50 + 1_000 * 15.00) / M,
        id="gemini-250k-prompt-wholly-at-the-premium",
    ),
    pytest.param(
        "gemini-2.5-pro",
        "official",
        None,
        Usage(prompt=150_000, completion=1_000),
        (150_000 * 1.25 + 1_000 * 10.00) / M,
        id="gemini-150k-prompt-standard",
    ),
    # https://platform.openai.com/docs/pricing: 1.05M-context models, over 272K input tokens 2x input
    # and 1.5x output for the whole request
    pytest.param(
        "gpt-5.4",
        "official",
        None,
        Usage(prompt=300_000, completion=1_000),
        (300_000 * 5.00 + 1_000 * 22.50) / M,
        id="openai-over-272k-2x-input-1.5x-output",
    ),
    pytest.param(
        "gpt-5.4",
        "official",
        None,
        Usage(prompt=272_000, completion=1_000),
        (272_000 * 2.50 + 1_000 * 15.00) / M,
        id="openai-272k-exactly-is-standard",
    ),
    # https://platform.openai.com/docs/guides/reasoning: reasoning tokens are billed as output and are
    # counted inside completion_tokens: 9,000 of the 10,000 output tokens reasoned, billed once
    pytest.param(
        "gpt-5",
        "official",
        None,
        Usage(prompt=1_000, completion=10_000, reasoning=9_000),
        (1_000 * 1.25 + 10_000 * 10.00) / M,
        id="openai-reasoning-heavy-answer-billed-once",
    ),
    # https://api-docs.deepseek.com/quick_start/pricing: cache hit $0.028, cache miss $0.28
    pytest.param(
        "deepseek-v3.2",
        "official",
        None,
        Usage.from_response(
            {
                "prompt_tokens": 10_000,
                "completion_tokens": 500,
                "prompt_cache_hit_tokens": 8_000,
                "prompt_cache_miss_tokens": 2_000,
            }
        ),
        (2_000 * 0.28 + 8_000 * 0.028 + 500 * 0.42) / M,
        id="deepseek-hit-miss-split",
    ),
    # https://platform.openai.com/docs/guides/flex-processing: "priced at Batch API rates", synchronous
    pytest.param(
        "gpt-5",
        "official",
        "flex",
        Usage(prompt=10_000, completion=1_000, cached=2_000),
        (8_000 * 0.625 + 2_000 * 0.0625 + 1_000 * 5.00) / M,
        id="openai-flex-at-the-batch-price",
    ),
    pytest.param(
        "gpt-5.4",
        "official",
        "flex",
        Usage(prompt=300_000, completion=1_000),
        (300_000 * 2.50 + 1_000 * 11.25) / M,
        id="openai-flex-over-272k-still-at-the-premium",
    ),
    # https://platform.openai.com/docs/pricing (Priority processing): GPT-5 $2.50 / $0.25 / $20.00
    pytest.param(
        "gpt-5",
        "official",
        "priority",
        Usage(prompt=10_000, completion=1_000, cached=2_000),
        (8_000 * 2.50 + 2_000 * 0.25 + 1_000 * 20.00) / M,
        id="openai-priority-premium",
    ),
    # the simulator's rule ([tiers.sim] in prices.toml): Flex at its batch rate, half the live one
    pytest.param(
        "gpt-4.1",
        "sim",
        "flex",
        Usage(prompt=10_000, completion=1_000),
        (10_000 * 1.00 + 1_000 * 4.00) / M,
        id="simulator-flex-at-half",
    ),
    # no flex rate (GPT-4.1 has no Flex): a Flex answer is billed at the default rate, an upper bound
    pytest.param(
        "gpt-4.1",
        "official",
        "flex",
        Usage(prompt=10_000, completion=1_000),
        (10_000 * 2.00 + 1_000 * 8.00) / M,
        id="flex-without-a-rate-at-the-default-rate",
    ),
    # no priority rate known for GPT-5.4: a Priority answer is priced nowhere, never at the default
    pytest.param(
        "gpt-5.4",
        "official",
        "priority",
        Usage(prompt=10_000, completion=1_000),
        None,
        id="priority-without-a-rate-is-price-unknown",
    ),
]


@pytest.mark.parametrize("model, provider, tier, usage, expected", BILLS)
def test_a_bill_is_what_the_providers_page_says(model, provider, tier, usage, expected):
    price = TABLE.lookup(model, provider)
    billed = price.billed_at(tier) if tier else price
    if expected is None:
        assert billed is None
        return
    assert billed.cost(usage) == pytest.approx(expected, rel=1e-12)
    parts = billed.breakdown(usage)  # the parts add up to the total
    assert parts.total_usd == pytest.approx(expected, rel=1e-12)
    assert parts.input_usd + parts.cached_input_usd + parts.cache_write_usd + parts.output_usd == pytest.approx(
        expected, rel=1e-12
    )


def test_reasoning_is_shown_apart_within_the_output_never_added_twice():
    price = TABLE.lookup("gpt-5")
    parts = price.breakdown(Usage(prompt=1_000, completion=10_000, reasoning=9_000))
    assert parts.output_usd == pytest.approx(10_000 * 10.00 / M)
    assert parts.reasoning_usd == pytest.approx(9_000 * 10.00 / M)  # part of output_usd, not beside it
    assert parts.total_usd == pytest.approx((1_000 * 1.25 + 10_000 * 10.00) / M)
    assert billable_output(Usage(completion=100, reasoning=400)) == 500  # a provider counting them apart


def test_a_row_may_move_only_the_excess_and_a_user_fills_a_rule_the_table_cannot_know(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text(
        '[prices."myrelay/my-model"]\ninput = 1.0\noutput = 4.0\n'
        'long_context = { above = 1000, input_factor = 2.0, applies_to = "excess" }\n'
        'priority = { input = 3.0, output = 9.0 }\nflex = "batch"\nbatch = { input = 0.5, output = 2.0 }\n',
        encoding="utf-8",
    )
    config = load_config(path)
    price = PriceTable.builtin(config.prices).lookup("my-model", "myrelay")
    # 1,500 prompt tokens: the 1,000 below the threshold at $1, the 500 past it at $2; output unmoved
    assert price.cost(Usage(prompt=1_500, completion=100)) == pytest.approx((1_000 * 1.0 + 500 * 2.0 + 100 * 4.0) / M)
    assert price.for_tier("priority").cost(Usage(prompt=100, completion=10)) == pytest.approx((300 + 90) / M)
    assert price.for_tier("flex").cost(Usage(prompt=100, completion=10)) == pytest.approx((50 + 20) / M)
    assert price.tiers() == ("default", "flex", "priority", "batch")


@pytest.mark.parametrize(
    "row, field, message",
    [
        ("long_context = { input_factor = 2.0 }", "long_context.above", "whole number of prompt tokens"),
        (
            'long_context = { above = 1000, input_factor = 2.0, applies_to = "most" }',
            "long_context.applies_to",
            '"whole"',
        ),
        (
            'long_context = { above = 1000, input_factor = 2.0, output_factor = 1.5, applies_to = "excess" }',
            "long_context.output_factor",
            "only the prompt moves",
        ),
        ('flex = "half"', "flex", 'must be "batch"'),
        ("priority = { input = 3.0 }", "priority.output", "missing"),
        ("priority = { input = 3.0, output = 9.0, speed = 2 }", "priority.speed", "unknown field"),
        ("batch = { input = 0.5, output = 2.0 }\nbatch_input = 0.4", "batch_input", "given twice"),
        ("cache_write_1h = -2", "cache_write_1h", "must be a number >= 0"),
    ],
    ids=[
        "no-threshold",
        "bad-applies-to",
        "excess-moves-output",
        "flex-word",
        "tier-without-output",
        "tier-unknown-field",
        "batch-twice",
        "negative-write-rate",
    ],
)
def test_a_bad_new_style_row_fails_naming_its_field(tmp_path, row, field, message):
    path = tmp_path / "config.toml"
    path.write_text(f'[prices."official/gpt-4.1"]\n{row}\n', encoding="utf-8")
    with pytest.raises(InputError, match=rf'prices\."official/gpt-4.1"\.{field}: .*{message}'):
        load_config(path)


def test_an_old_style_row_still_loads_and_keeps_the_tables_rules(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text(  # the row a user wrote before rows could say more: input, cached, output, batch
        '[prices."myrelay/claude-sonnet-4.5"]\ninput = 2.4\ncached_input = 0.24\noutput = 12.0\n'
        "batch_input = 1.2\nbatch_output = 6.0\n\n"
        '[prices."official/claude-sonnet-4.5"]\noutput = 14.0\n',
        encoding="utf-8",
    )
    table = PriceTable.builtin(load_config(path).prices)
    mine = table.lookup("claude-sonnet-4.5", "myrelay")
    assert (mine.input, mine.cached_input, mine.output, mine.batch_price().output) == (2.4, 0.24, 12.0, 6.0)
    assert mine.long_context is None and mine.cache_write is None  # a new row says only what it says
    official = table.lookup("claude-sonnet-4.5")  # an override of one field keeps the rest of the row
    assert official.output == 14.0 and official.cache_write_1h == 6.00 and official.long_context.above == 200_000


# --------------------------------------------------------------------------- usage as each provider sends it

SHAPES = {
    # https://platform.openai.com/docs/api-reference/chat/object (usage)
    "openai": (
        {
            "prompt_tokens": 2006,
            "completion_tokens": 300,
            "total_tokens": 2306,
            "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 192, "audio_tokens": 0},
        },
        Usage(prompt=2006, completion=300, cached=1920, reasoning=192),
    ),
    # OpenRouter's normalised usage (and OpenAI's newer models): cache writes in prompt_tokens_details
    "cache-write-tokens": (
        {
            "prompt_tokens": 3000,
            "completion_tokens": 10,
            "prompt_tokens_details": {"cached_tokens": 1000, "cache_write_tokens": 1500},
        },
        Usage(prompt=3000, completion=10, cached=1000, cache_write=1500),
    ),
    # an OpenAI-compatible relay in front of Anthropic that counts the cache inside prompt_tokens
    # (https://docs.claude.com/en/api/messages: usage.cache_creation_input_tokens, cache_read_input_tokens)
    "anthropic-relay": (
        {
            "prompt_tokens": 12050,
            "completion_tokens": 100,
            "cache_creation_input_tokens": 2000,
            "cache_read_input_tokens": 10000,
            "prompt_tokens_details": {"cached_tokens": 10000},
        },
        Usage(prompt=12050, completion=100, cached=10000, cache_write=2000),
    ),
    # one that passes Anthropic's own usage on: input_tokens leaves the cache out; writes split by TTL
    "anthropic-passthrough": (
        {
            "input_tokens": 50,
            "output_tokens": 100,
            "cache_creation_input_tokens": 2000,
            "cache_read_input_tokens": 10000,
            "cache_creation": {"ephemeral_5m_input_tokens": 500, "ephemeral_1h_input_tokens": 1500},
        },
        Usage(prompt=12050, completion=100, cached=10000, cache_write=500, cache_write_1h=1500),
    ),
    # one that copied input_tokens into prompt_tokens: fewer prompt tokens than cache reads says so
    "anthropic-input-as-prompt": (
        {"prompt_tokens": 50, "completion_tokens": 100, "cache_read_input_tokens": 10000},
        Usage(prompt=10050, completion=100, cached=10000),
    ),
    # https://api-docs.deepseek.com/api/create-chat-completion (usage)
    "deepseek": (
        {
            "prompt_tokens": 10000,
            "completion_tokens": 500,
            "total_tokens": 10500,
            "prompt_cache_hit_tokens": 8000,
            "prompt_cache_miss_tokens": 2000,
        },
        Usage(prompt=10000, completion=500, cached=8000),
    ),
    # Moonshot's older answers: a top-level cached_tokens (https://platform.moonshot.cn/docs/api/caching)
    "moonshot-old": (
        {"prompt_tokens": 3000, "completion_tokens": 200, "total_tokens": 3200, "cached_tokens": 2048},
        Usage(prompt=3000, completion=200, cached=2048),
    ),
    # vLLM and llama.cpp: the counts, nothing else (prompt_tokens_details null); nothing invented
    "vllm": (
        {"prompt_tokens": 20, "total_tokens": 30, "completion_tokens": 10, "prompt_tokens_details": None},
        Usage(prompt=20, completion=10),
    ),
    "llama-cpp": (
        {
            "completion_tokens": 10,
            "prompt_tokens": 20,
            "total_tokens": 30,
            "prompt_tokens_details": {"cached_tokens": 12},
        },
        Usage(prompt=20, completion=10, cached=12),
    ),
    # a provider whose total says reasoning is counted apart from completion_tokens: added, billed once
    "reasoning-apart": (
        {
            "prompt_tokens": 10,
            "completion_tokens": 50,
            "total_tokens": 260,
            "completion_tokens_details": {"reasoning_tokens": 200},
        },
        Usage(prompt=10, completion=250, reasoning=200),
    ),
    "garbage": (
        {
            "prompt_tokens": "12",
            "completion_tokens": -1,
            "prompt_tokens_details": [1],
            "cache_creation": "x",
            "total_tokens": True,
        },
        Usage(),
    ),
}


ASKED = web.AppKey("asked", list)
"""What each request asked for as its `service_tier` (None: nothing)."""


async def _relay(shapes: dict[str, dict], tiers: dict[str, str | None]):
    """A stand-in relay on loopback: answers each model with its usage shape and service tier."""

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        model = body["model"]
        answer = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
            "usage": shapes.get(model),
        }
        if tiers.get(model) is not None:
            answer["service_tier"] = tiers[model]
        request.app[ASKED].append(body.get("service_tier"))
        return web.json_response(answer)

    app = web.Application()
    app[ASKED] = []
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # noqa: SLF001 - aiohttp names no public getter
    return runner, app, f"http://127.0.0.1:{port}/v1"


@pytest.mark.parametrize("shape", list(SHAPES))
async def test_usage_is_read_as_each_provider_reports_it(shape):
    runner, _, url = await _relay({name: raw for name, (raw, _) in SHAPES.items()}, {})
    client = ProviderClient(ProviderProfile("relay", base_url=url), url)
    try:
        result = await client.complete({"model": shape, "messages": [{"role": "user", "content": "hi"}]})
    finally:
        await client.aclose()
        await runner.cleanup()
    assert result.usage == SHAPES[shape][1]


@pytest.mark.parametrize(
    "asked, served, billed",
    [
        ("flex", "flex", "flex"),
        ("flex", "default", None),  # the answer says the default served it: billed so
        ("flex", None, None),  # a relay that says nothing: the dearer of flex and the default
        ("priority", "default", None),  # a priority request downgraded: the default tier
        ("priority", None, "priority"),  # unsaid: the dearer, priority
        (None, "priority", "priority"),  # a project whose default is priority: the answer says so
        (None, "auto", None),
    ],
    ids=[
        "flex-served",
        "flex-downgraded",
        "flex-unsaid",
        "priority-downgraded",
        "priority-unsaid",
        "priority-by-project",
        "auto-is-default",
    ],
)
async def test_the_tier_billed_is_the_one_the_answer_says_served_it(asked, served, billed):
    runner, app, url = await _relay({"gpt-5": SHAPES["openai"][0]}, {"gpt-5": served})
    client = ProviderClient(ProviderProfile("relay", base_url=url, service_tier=asked), url)
    try:
        result = await client.complete({"model": "gpt-5", "messages": [{"role": "user", "content": "hi"}]})
    finally:
        await client.aclose()
        await runner.cleanup()
    assert app[ASKED] == [asked]  # sent as the API's service_tier, or not at all
    assert result.service_tier == billed


# --------------------------------------------------------------------------- the tiers on the simulator


def test_a_flex_run_on_the_simulator_is_billed_at_half_the_live_price_and_says_so(tmp_path):
    job = write_batch(tmp_path / "job.jsonl", [f"task {i} " + "word " * i for i in range(16)], model="gpt-4.1")
    result = run_cli(
        "run",
        str(job),
        "--headless",
        "--provider",
        "sim",
        "--service-tier",
        "flex",
        "--sim-latency-ms",
        "5",
        "--sim-error-rate",
        "0",
        "--out",
        str(tmp_path / "run"),
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    parts = summary["cost_breakdown"]
    assert summary["succeeded"] == 16 and parts["service_tier"] == "flex"
    assert parts["by_tier"]["flex"] == pytest.approx(summary["cost_usd"], abs=1e-6) and parts["by_tier"]["default"] == 0
    assert summary["cost_usd"] == pytest.approx(parts["at_default_tier_usd"] / 2, abs=1e-6)  # the batch price
    price = PriceTable.builtin().lookup("gpt-4.1", "sim").for_tier("flex")
    tokens = summary["tokens"]
    assert summary["cost_usd"] == pytest.approx(
        price.cost(Usage(prompt=tokens["prompt"], completion=tokens["completion"], cached=tokens["cached"])), abs=1e-6
    )
    assert parts["input_usd"] + parts["cached_input_usd"] + parts["cache_write_usd"] + parts["output_usd"] == (
        pytest.approx(summary["cost_usd"], abs=1e-5)
    )
    assert "service tier: flex $" in result.stderr and "at the default tier (50% less)" in result.stderr
    answers = read_jsonl(tmp_path / "run" / "results.jsonl")
    assert {line["response"]["body"]["service_tier"] for line in answers} == {"flex"}  # the sim echoed it


def test_flex_without_capacity_is_retried_unbilled_and_its_deadlines_are_minutes(tmp_path, sim_factory):
    sim = sim_factory(flex_unavailable_rate=0.3)
    job = write_batch(tmp_path / "job.jsonl", [f"task {i}" for i in range(12)], model="gpt-5")
    result = run_cli(
        "run",
        str(job),
        "--headless",
        "--base-url",
        sim.base_url,
        "--service-tier",
        "flex",
        "--max-attempts",
        "8",
        "--out",
        str(tmp_path / "run"),
    )
    assert result.returncode == 0, result.stderr
    stats = sim.stats()
    assert stats["flex_unavailable"] > 0 and stats["successes_by_tier"] == {"flex": 12}
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["succeeded"] == 12 and summary["requests"]["rate_limited"] == stats["flex_unavailable"]
    refused = [a for i in range(12) for a in attempts_of(tmp_path / "run", i) if a["status"] == 429]
    assert len(refused) == stats["flex_unavailable"] and all(a["cost_usd"] is None for a in refused)
    assert summary["cost_usd"] == pytest.approx(summary["cost_breakdown"]["at_default_tier_usd"] / 2, abs=1e-6)
    journal = Journal.open(tmp_path / "run", readonly=True)
    try:
        settings = journal.queries.meta()["plan"]["settings"]["calls"]
    finally:
        journal.close()
    # a Flex call may queue for minutes: 15-minute deadlines, and no straggler resends (and pays for) it
    assert (settings["timeout_s"], settings["first_token_timeout_s"], settings["straggler_factor"]) == (900, 900, None)


async def test_the_simulator_serves_each_tier_and_echoes_it(sim_factory):
    sim = sim_factory(flex_unavailable_rate=0.0)
    billed = {}
    for tier in ("priority", "default", "flex"):
        client = ProviderClient(ProviderProfile("s", base_url=sim.base_url, service_tier=tier), sim.base_url)
        try:
            result = await client.complete(
                {"model": "gpt-5", "messages": [{"role": "user", "content": tier}]}, stream=tier == "flex"
            )
        finally:
            await client.aclose()
        assert result.body["service_tier"] == tier  # a stream's chunks carry it too
        billed[tier] = result.service_tier
    assert billed == {"priority": "priority", "default": None, "flex": "flex"}
    assert sim.stats()["successes_by_tier"] == {"default": 1, "flex": 1, "priority": 1}
    # Flex waits longer, Priority less, than the default tier's drawn latency (the decision, not a clock)
    simulator = Simulator(SimConfig(latency_ms=200.0, latency_sigma=0.0, flex_unavailable_rate=0.0))
    delays = {
        tier: simulator.chat(
            json.dumps(
                {"model": "m", "service_tier": tier, "messages": [{"role": "user", "content": "same"}]}
            ).encode(),
            None,
        ).delay_s
        for tier in ("priority", "default", "flex")
    }
    assert delays == pytest.approx({"priority": 0.1, "default": 0.2, "flex": 0.8})
    refused = simulator.chat(
        b'{"model": "m", "service_tier": "cheap", "messages": [{"role": "user", "content": "x"}]}', None
    )
    assert refused.status == 400 and refused.body["error"]["param"] == "service_tier"


# --------------------------------------------------------------------------- profiles


def test_a_profiles_service_tier_round_trips_and_stays_out_of_the_key_checks(tmp_path, capsys):
    profile = ProviderProfile(
        "openai-flex", base_url="https://api.openai.com/v1", api_key_env="OPENAI_API_KEY", service_tier="flex"
    )
    assert profile.problem() is None
    table = profile.to_toml()
    assert table["service_tier"] == "flex"
    assert ProviderProfile.from_toml("openai-flex", table, source="x.toml") == profile
    assert (
        profile.fallback() is None
        and ProviderProfile(
            "p",
            base_url="https://a.example/v1",
            fallback_base_url="https://b.example/v1",
            service_tier="flex",
        )
        .fallback()
        .service_tier
        is None
    )  # another endpoint's dialect: not carried over
    path = tmp_path / "config" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        '[providers.openai-flex]\nbase_url = "https://api.openai.com/v1"\nservice_tier = "flex"\n', encoding="utf-8"
    )
    assert load_config(path).profile("openai-flex").service_tier == "flex"
    listed = run_cli("providers")
    assert "service tier: flex" in listed.stdout
    path.write_text(
        '[providers.openai-flex]\nbase_url = "https://api.openai.com/v1"\nservice_tier = "cheap"\n', encoding="utf-8"
    )
    with pytest.raises(InputError, match=r"providers\.openai-flex\.service_tier: must be one of default, flex"):
        load_config(path)


def test_a_budget_with_priority_and_no_priority_price_refuses_to_start(tmp_path, sim):
    job = write_batch(tmp_path / "job.jsonl", ["one"], model="gpt-5.4")
    result = run_cli(
        "run",
        str(job),
        "--headless",
        "--base-url",
        sim.base_url,
        "--service-tier",
        "priority",
        "--budget",
        "1",
        "--out",
        str(tmp_path / "run"),
    )
    assert result.returncode == 2 and "no priority price is known" in result.stderr, result.stderr
    assert not (tmp_path / "run").exists()


# --------------------------------------------------------------------------- the budget's worst case


@pytest.mark.parametrize(
    "tier, rate",
    [(None, "default"), ("flex", "default"), ("priority", "priority")],
    ids=["default", "flex-reserves-the-default", "priority-reserves-the-premium"],
)
def test_a_reservation_is_priced_at_the_dearer_tier_and_past_the_threshold_at_the_premium(tier, rate):
    from swarm_tui.engine.billing import Billing
    from swarm_tui.engine.ledger import SpendLedger, worst_usage

    price = TABLE.lookup("gpt-5.4" if tier != "priority" else "gpt-5")
    short = {"model": "m", "max_tokens": 1000, "messages": [{"role": "user", "content": "word " * 1000}]}
    long = {**short, "messages": [{"role": "user", "content": "word " * 200_000}]}  # ~333k tokens, erring high
    for body, over in ((short, False), (long, True)):
        ledger = SpendLedger(budget_usd=1_000.0)
        billing = Billing(ledger, {"e": price}, stop=lambda reason: None, calls_out=lambda: False, tiers={"e": tier})
        assert billing.reserve(0, 1, body, "e")
        usage = worst_usage(body, price.max_output)
        at = price if rate == "default" else price.for_tier(rate)
        expected = at.cost(usage)
        assert ledger.reserved_usd == pytest.approx(expected, rel=1e-12)
        if over and price.long_context is not None:  # GPT-5.4 above 272k: 2x input, 1.5x output, reserved so
            assert usage.prompt > 272_000
            assert expected == pytest.approx((usage.prompt * 5.00 + usage.completion * 22.50) / M, rel=1e-12)
