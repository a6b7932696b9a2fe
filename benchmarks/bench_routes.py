"""Routing across endpoints, through the real CLI against simulators in their own processes.

    python benchmarks/bench_routes.py [--repeat 3] [--scenarios balance,chain,cheapest]

* balance: three endpoints of 600 RPM each (their limits not told: learned from their headers),
  600 tasks at 200 ms, `--route balance`: makespan against the ideal of their summed rate (20 s),
  the share of requests answered 429, each endpoint's share, every task answered once;
* chain: three endpoints whose first two answer only 5xx, 100 tasks, `--route fallback`: done,
  requests per endpoint, the switches journaled;
* cheapest: two priced endpoints, 200 tasks, `--route cheapest`: the share the cheaper one took;
* litellm: the balance scenario side by side with LiteLLM's Router on the same three endpoints
  (`litellm_router_load.py`, run by `--litellm-python`, a Python that has `litellm`).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from swarm_tui.sim import SimConfig, SimServer

MODEL = "gpt-4.1-mini"


def write_job(path: Path, n: int, tag: str) -> Path:
    with path.open("w", encoding="utf-8") as out:
        for i in range(n):
            body = {"model": MODEL, "max_tokens": 16, "messages": [{"role": "user", "content": f"{tag} {i}"}]}
            out.write(json.dumps({"custom_id": f"t{i:05d}", "body": body}) + "\n")
    return path


def run(tmp: Path, doors: dict[str, SimServer], args: list[str], n: int, extra: str = "") -> dict:
    config = tmp / "config.toml"
    tables = [f'[providers.{name}]\nbase_url = "{s.base_url}"\nmodel = "{MODEL}"\n' for name, s in doors.items()]
    config.write_text("\n".join(tables) + extra, encoding="utf-8")
    out = tmp / f"run-{len(list(tmp.glob('run-*')))}"
    job = write_job(tmp / "job.jsonl", n, out.name)
    env = {**os.environ, "SWARM_TUI_CONFIG": str(config)}
    cmd = [sys.executable, "-m", "swarm_tui", "run", str(job), "--headless", "--out", str(out), *args]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"exit {done.returncode}: {done.stderr[-2000:]}")
    summary = json.loads((out / "summary.json").read_text())
    with sqlite3.connect(out / "journal.sqlite") as db:
        summary["switches"] = db.execute("SELECT COUNT(*) FROM log WHERE kind = 'EndpointSwitched'").fetchone()[0]
    for server in doors.values():
        server.reset()
    return summary


def balance(tmp: Path) -> str:
    sims = {n: SimServer(SimConfig(latency_ms=200, latency_sigma=0.1, rpm=600)).start(mode="process") for n in "abc"}
    try:
        s = run(tmp, sims, ["--provider", "a,b,c", "--route", "balance"], 600)
    finally:
        for server in sims.values():
            server.stop()
    ends = s["endpoints"]
    sent = sum(d["requests"] for d in ends.values())
    limited = sum(d["rate_limited"] for d in ends.values())
    shares = " / ".join(f"{d['answered'] / s['total']:.0%}" for d in ends.values())
    return (
        f"balance: {s['succeeded']}/{s['total']} in {s['makespan_s']:.1f} s = {s['makespan_s'] / 20:.2f}x ideal, "
        f"429s {limited / sent:.1%} of {sent} requests, shares {shares}"
    )


def chain(tmp: Path) -> str:
    sims = {
        "first": SimServer(SimConfig(latency_ms=20, error_rate=1.0)).start(mode="process"),
        "second": SimServer(SimConfig(latency_ms=20, error_rate=1.0)).start(mode="process"),
        "third": SimServer(SimConfig(latency_ms=20)).start(mode="process"),
    }
    try:
        s = run(tmp, sims, ["--provider", "first,second,third", "--route", "fallback"], 100)
    finally:
        for server in sims.values():
            server.stop()
    per = ", ".join(f"{name} {d['requests']}" for name, d in s["endpoints"].items())
    done = f"{s['succeeded']}/{s['total']} done in {s['makespan_s']:.1f} s"
    return f"chain: {done}; requests {per}; {s['switches']} switches"


def cheapest(tmp: Path) -> str:
    sims = {n: SimServer(SimConfig(latency_ms=50, latency_sigma=0.1)).start(mode="process") for n in ("dear", "cheap")}
    prices = (
        f'\n[prices."cheap/{MODEL}"]\ninput = 0.1\noutput = 0.4\n\n[prices."dear/{MODEL}"]\ninput = 2.0\noutput = 8.0\n'
    )
    try:
        s = run(tmp, sims, ["--provider", "dear,cheap", "--route", "cheapest"], 200, prices)
    finally:
        for server in sims.values():
            server.stop()
    cheap = s["endpoints"].get("cheap", {}).get("answered", 0)
    return (
        f"cheapest: {cheap}/{s['total']} answered by the cheaper endpoint (the rest spilled while its 50 slots "
        f"were all taken), cost ${s['cost_usd']:.4f}"
    )


def litellm_side_by_side(tmp: Path, python: str | None) -> str:
    """The balance scenario, then LiteLLM's Router on the same endpoints (each counting its own 429s)."""
    if not python:
        return "litellm: skipped (give --litellm-python, a Python with litellm installed)"
    sims = {n: SimServer(SimConfig(latency_ms=200, latency_sigma=0.1, rpm=600)).start(mode="process") for n in "abc"}
    lines = []
    try:
        s = run(tmp, sims, ["--provider", "a,b,c", "--route", "balance"], 600)
        sent = sum(d["requests"] for d in s["endpoints"].values())
        limited = sum(d["rate_limited"] for d in s["endpoints"].values())
        lines.append(
            f"litellm: swarm-tui --route balance: {s['succeeded']}/600 in {s['makespan_s']:.1f} s "
            f"({s['makespan_s'] / 20:.2f}x ideal), {limited / sent:.1%} 429s of {sent} requests"
        )
        contenders = [("simple-shuffle", []), ("least-busy", []), ("usage-based-routing-v2", ["600", "3"])]
        for strategy, told in contenders:
            urls = ",".join(server.base_url for server in sims.values())
            script = str(Path(__file__).with_name("litellm_router_load.py"))
            done = subprocess.run(
                [python, script, urls, "600", "150", strategy, *told], capture_output=True, text=True, timeout=900
            )
            if done.returncode != 0:
                lines.append(f"litellm {strategy}: failed: {done.stderr[-500:]}")
                continue
            got = json.loads(done.stdout.strip().splitlines()[-1])
            stats = [server.stats() for server in sims.values()]
            sent = sum(st["requests"] for st in stats)
            limited = sum(st["rate_limited"] for st in stats)
            lines.append(
                f"litellm: LiteLLM Router {strategy} (150 in flight, "
                f"{'told 600 RPM each, 3 retries' if told else 'its defaults'}): {got['done']}/600 done "
                f"({got['failed']} lost) in {got['makespan_s']:.1f} s, {limited / max(sent, 1):.1%} 429s of {sent}"
            )
            for server in sims.values():
                server.reset()
    finally:
        for server in sims.values():
            server.stop()
    return "\n".join(lines)


SCENARIOS = {"balance": balance, "chain": chain, "cheapest": cheapest}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False
    )
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help="balance,chain,cheapest,litellm")
    parser.add_argument("--litellm-python", help="a Python with litellm installed (the litellm scenario)")
    args = parser.parse_args()
    for _ in range(args.repeat):
        for name in args.scenarios.split(","):
            with tempfile.TemporaryDirectory() as tmp:
                if name == "litellm":
                    print(litellm_side_by_side(Path(tmp), args.litellm_python), flush=True)
                else:
                    print(SCENARIOS[name](Path(tmp)), flush=True)


if __name__ == "__main__":
    main()
