"""What billing an answer costs: its usage read and priced, before and after prices could say
tiers, cache writes and long context.

Per answer the engine reads the answer's `usage` (`Usage.from_response`), decides the tier that
served it (`providers.client.answer_tier`) and prices it at that tier (`engine.billing.Billing`:
the tier's price made once per endpoint). Cases, each on
the usage object of a typical OpenAI answer (cached and reasoning details included):

  before      --before's `core/usage.py` and `pricing.py` (git show REV:..., loaded beside
              today's): Usage.from_response + Price.cost
  after       today's: Usage.from_response + answer_tier + Billing.billed_price(...).cost, default tier
  after-flex  the same for an answer served at Flex
  after-cache an Anthropic answer through a relay with cache reads and writes (the slow path:
              every kind of token priced apart)

Usage:  python benchmarks/bench_billing.py [--number 50000] [--repeat 5] [--before REV]
Figures: microseconds per answer, the best of --repeat rounds, the cases interleaved round by
round; `xN` is the ratio to `before` in the same run. They depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import subprocess
import sys
import tempfile
import timeit
from pathlib import Path

from swarm_tui.core.usage import Usage
from swarm_tui.engine.billing import Billing
from swarm_tui.engine.ledger import SpendLedger
from swarm_tui.pricing import PriceTable
from swarm_tui.providers.client import answer_tier

ROOT = Path(__file__).resolve().parent.parent
OPENAI_USAGE = {
    "prompt_tokens": 2006,
    "completion_tokens": 300,
    "total_tokens": 2306,
    "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 192, "audio_tokens": 0, "accepted_prediction_tokens": 0},
}
RELAY_USAGE = {
    "prompt_tokens": 12050,
    "completion_tokens": 100,
    "cache_creation_input_tokens": 2000,
    "cache_read_input_tokens": 10000,
    "prompt_tokens_details": {"cached_tokens": 10000},
}


def load_before(rev: str, tmp: Path):
    """(Usage, PriceTable) of `rev`, loaded as modules beside today's."""
    modules = {}
    for name, path in (("core.usage_before", "swarm_tui/core/usage.py"), ("pricing_before", "swarm_tui/pricing.py")):
        source = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, capture_output=True, text=True, check=True)
        file = tmp / f"{name.replace('.', '_')}.py"
        file.write_text(source.stdout, encoding="utf-8")
        spec = importlib.util.spec_from_file_location(f"swarm_tui.{name}", file)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        modules[name] = module
    return modules["core.usage_before"].Usage, modules["pricing_before"].PriceTable


def measure(cases: dict, number: int, repeat: int) -> dict[str, float]:
    best = dict.fromkeys(cases, float("inf"))
    for _ in range(repeat):
        for name, fn in cases.items():
            best[name] = min(best[name], timeit.timeit(fn, number=number) / number * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=50000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--before", default="4c22330", help="the revision to compare with (default: the tree before tiered prices)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old_usage, old_table = load_before(args.before, Path(tmp))
        old_price = old_table.builtin().lookup("gpt-4.1")
        table = PriceTable.builtin()
        prices = {"openai": table.lookup("gpt-5"), "relay": table.lookup("claude-sonnet-4.5")}
        billing = Billing(SpendLedger(None), prices, stop=None, calls_out=None)

        def before(raw=OPENAI_USAGE):
            return old_price.cost(old_usage.from_response(raw))

        def after(raw=OPENAI_USAGE, served="default", endpoint="openai"):
            usage = Usage.from_response(raw)
            price = billing.billed_price(endpoint, answer_tier(None, served))
            return price.cost(usage) if price is not None else None

        cases = {
            "before": before,
            "after": after,
            "after-flex": functools.partial(after, served="flex"),
            "after-cache": functools.partial(after, raw=RELAY_USAGE, endpoint="relay"),
        }
        best = measure(cases, args.number, args.repeat)
    base = best["before"]
    for name, micros in best.items():
        print(f"{name:12} {micros:6.2f} us/answer  x{micros / base:.2f}")


if __name__ == "__main__":
    main()
