"""LiteLLM's Router on the same endpoints as `bench_routes.py --scenarios litellm` (run by it, in a
Python that has `litellm`: it is not a dependency of swarm-tui).

    python litellm_router_load.py URL1,URL2,URL3 TASKS IN_FLIGHT [STRATEGY [RPM RETRIES]]

The way its docs show a Router in front of several deployments of one model: the three endpoints
as deployments of one model name (their limits not told, as swarm-tui is not told them), the
Router's default retries, `asyncio.gather` under a semaphore of IN_FLIGHT (the Router has no
concurrency limit of its own); with RPM and RETRIES, each deployment is told its RPM (what
`usage-based-routing-v2` routes by) and the Router retries that many times. Prints one JSON line:
done, failed, makespan.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

import litellm
from litellm import Router

litellm.suppress_debug_info = True


async def main(
    urls: list[str], tasks: int, in_flight: int, strategy: str, rpm: int | None, retries: int | None
) -> None:
    told = {"rpm": rpm} if rpm else {}
    router = Router(
        model_list=[
            {
                "model_name": "pool",
                "litellm_params": {
                    "model": "openai/gpt-4.1-mini",
                    "api_base": url,
                    "api_key": "sk-no-key-required",
                    **told,
                },
            }
            for url in urls
        ],
        routing_strategy=strategy,
        **({"num_retries": retries} if retries is not None else {}),
    )
    gate = asyncio.Semaphore(in_flight)

    async def one(i: int) -> bool:
        async with gate:
            try:
                await router.acompletion(
                    model="pool", messages=[{"role": "user", "content": f"litellm {i}"}], max_tokens=16
                )
                return True
            except Exception:  # noqa: BLE001 - counted as lost, as a user's gather would
                return False

    started = time.perf_counter()
    results = await asyncio.gather(*(one(i) for i in range(tasks)))
    print(
        json.dumps({"done": sum(results), "failed": tasks - sum(results), "makespan_s": time.perf_counter() - started})
    )


if __name__ == "__main__":
    asyncio.run(
        main(
            sys.argv[1].split(","),
            int(sys.argv[2]),
            int(sys.argv[3]),
            sys.argv[4] if len(sys.argv) > 4 else "simple-shuffle",
            int(sys.argv[5]) if len(sys.argv) > 5 else None,
            int(sys.argv[6]) if len(sys.argv) > 6 else None,
        )
    )
