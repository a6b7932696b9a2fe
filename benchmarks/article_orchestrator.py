"""The source article's orchestrator, run as the article writes it: the baseline every swarm-tui
benchmark is measured against in the same run.

Where each part comes from in /work/shared/seed/seed-article-ja.txt (line numbers of that file):

  client          STEP 2 (l. 73): `AsyncOpenAI(base_url=..., api_key=...)`, nothing else, so the
                  SDK's default retries: 2 more attempts on a timeout, a lost connection, 408,
                  409, 429 or 5xx, backing off 0.5-8 s and honouring Retry-After.
  sub_agent       STEP 2 (l. 78-93): one call, every exception caught and returned as
                  `{"ok": False}`; its `timeout=45` is error 3's Fix 1 (l. 200-205): `timeout=15`.
  safe_call       error 1's fix (l. 157-165): tenacity's `wait_exponential(multiplier=0.5, max=8)`,
                  `stop_after_attempt(4)` around `sub_agent`. As written, `sub_agent` catches every
                  exception itself, so tenacity never sees one and never retries: the SDK's own
                  retries are the only ones. Kept that way (it is the article's code).
  orchestrate     error 1's fix (l. 167-172): `asyncio.Semaphore(conc)` + `asyncio.gather`.
  orchestrate_resilient
                  error 3's Fix 2 (l. 210-217): every task at `conc=30`, then the agents that
                  failed once more at `conc=10`, the two lists' results together.

Three departures, each so the code does what its text says rather than weaken the baseline:
  * the article re-runs `orchestrate(failed, conc=10)` on the failed *results* (dicts of id, ok,
    err: no "prompt"), so every re-run agent would fail at once with a KeyError, caught, and
    send nothing; here the failed agents' tasks are re-run ("ハングしたWorkerだけ差し替えて再実行").
  * the request body is the benchmark's (the same for every contender: model, max_tokens,
    the article's system and user messages), not `max_tokens=2048` and `extra_body={"swarm_id"}`.
  * a task counts as done if either pass answered it (the article's `results.extend` keeps the
    first pass's failures in the list beside their re-runs).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import tenacity
from openai import AsyncOpenAI

FIRST_PASS_CONCURRENCY = 30
"""orchestrate_resilient's `orchestrate(batch, conc=30)`."""
RERUN_CONCURRENCY = 10
"""orchestrate_resilient's `orchestrate(failed, conc=10)`."""


@dataclass
class ArticleResult:
    ok: int
    failed: int
    makespan_s: float
    task_latencies_s: list[float]
    """Per task answered: from its first pass's start to its answer (a re-run task waits through both)."""
    rerun: int = 0
    """Agents that failed the first pass and were re-run."""


async def run_article(
    base_url: str,
    bodies: list[dict],
    *,
    concurrency: int = FIRST_PASS_CONCURRENCY,
    rerun_concurrency: int = RERUN_CONCURRENCY,
    timeout: float = 15.0,
    api_key: str = "sk-no-key-required",
) -> ArticleResult:
    client = AsyncOpenAI(base_url=base_url, api_key=api_key)  # STEP 2: the SDK's default retries

    async def sub_agent(agent_id: int, task: dict) -> dict:  # STEP 2, timeout from error 3's Fix 1
        try:
            r = await client.chat.completions.create(**task, timeout=timeout)
            return {"id": agent_id, "ok": True, "text": r.choices[0].message.content}
        except Exception as e:
            return {"id": agent_id, "ok": False, "err": repr(e)}

    @tenacity.retry(  # error 1's fix; never fires: sub_agent returns its exceptions
        wait=tenacity.wait_exponential(multiplier=0.5, max=8),
        stop=tenacity.stop_after_attempt(4),
        retry=tenacity.retry_if_exception_type(Exception),
    )
    async def safe_call(agent_id: int, task: dict) -> dict:
        return await sub_agent(agent_id, task)

    started: dict[int, float] = {}

    async def orchestrate(batch: list[tuple[int, dict]], conc: int) -> list[dict]:  # error 1's fix
        sem = asyncio.Semaphore(conc)

        async def run(i: int, t: dict) -> dict:
            async with sem:
                started.setdefault(i, time.monotonic())
                result = await safe_call(i, t)
                result["done_at"] = time.monotonic()
                return result

        return await asyncio.gather(*[run(i, t) for i, t in batch])

    async def orchestrate_resilient(batch: list[dict]) -> list[dict]:  # error 3's Fix 2
        results = await orchestrate(list(enumerate(batch)), conc=concurrency)
        failed = [r for r in results if not r["ok"]]
        if failed:
            retry = await orchestrate([(r["id"], batch[r["id"]]) for r in failed], conc=rerun_concurrency)
            results.extend(retry)
        return results

    t0 = time.monotonic()
    try:
        results = await orchestrate_resilient(bodies)
    finally:
        makespan = time.monotonic() - t0
        await client.close()
    answered = {r["id"]: r["done_at"] for r in results if r["ok"]}
    latencies = sorted(done - started[i] for i, done in answered.items())
    rerun = len(results) - len(bodies)
    return ArticleResult(len(answered), len(bodies) - len(answered), makespan, latencies, rerun)
