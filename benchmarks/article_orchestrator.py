"""The source article's orchestrator (shared/seed/seed-article-ja.txt, STEP 2 and error 1's fix),
as the baseline every swarm-tui benchmark is measured against in the same run.

`asyncio.gather` over all tasks, an `asyncio.Semaphore(50)`, and tenacity's
`wait_exponential(multiplier=0.5, max=8)` with `stop_after_attempt(4)` around each call,
per-call `timeout=15`. One correction, so the baseline is not weaker than intended: in the
article `sub_agent` catches every exception itself, so the tenacity decorator around it never
sees one and never retries; here the exception reaches tenacity, as the article means it to.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import tenacity
from openai import AsyncOpenAI


@dataclass
class ArticleResult:
    ok: int
    failed: int
    makespan_s: float
    task_latencies_s: list[float]


async def run_article(
    base_url: str,
    bodies: list[dict],
    *,
    concurrency: int = 50,
    timeout: float = 15.0,
    api_key: str = "sk-no-key-required",
) -> ArticleResult:
    client = AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0)

    @tenacity.retry(
        wait=tenacity.wait_exponential(multiplier=0.5, max=8),
        stop=tenacity.stop_after_attempt(4),
        retry=tenacity.retry_if_exception_type(Exception),
        reraise=True,
    )
    async def safe_call(body: dict) -> str:
        r = await client.chat.completions.create(**body, timeout=timeout)
        return r.choices[0].message.content or ""

    sem = asyncio.Semaphore(concurrency)
    latencies: list[float] = []

    async def run(body: dict) -> bool:
        async with sem:
            started = time.monotonic()
            try:
                await safe_call(body)
                latencies.append(time.monotonic() - started)
                return True
            except Exception:
                return False

    t0 = time.monotonic()
    results = await asyncio.gather(*[run(b) for b in bodies])
    makespan = time.monotonic() - t0
    await client.close()
    ok = sum(results)
    return ArticleResult(ok, len(results) - ok, makespan, sorted(latencies))
