"""The simulator: an OpenAI-compatible chat-completions server on loopback.

It lets the product run with no key and no network, and it is the tests' and benchmarks'
endpoint. It models what real providers do (lognormal latency, RPM/TPM token buckets
answered with 429 + ``retry-after`` + ``x-ratelimit-*``, 5xx bursts, hung requests and
stalled streams, context-length errors, ``cached_tokens`` for a repeated prefix), and acts
as a tool-calling model when offered tools (``tools.py``), seeded and deterministic. It also
speaks OpenAI's Batch API (``/v1/files``, ``/v1/batches``) on a compressed clock.
Standalone: it imports neither Textual nor the rest of swarm_tui.

    config.py     SimConfig, the knobs
    behaviour.py  pure rules: tokens, buckets, prefix cache, draws, answers, scripted markers
    tools.py      pure rules of the tool-calling agent: tool rounds, calls, arguments, quoting
    judging.py    pure rules of the judge (verdicts) and of answer quality (drift, ``⟨qN⟩``)
    errors.py     OpenAI error bodies
    core.py       Simulator: state and the per-request decision
    batches.py    the Batch API: uploaded files, batches on a compressed clock, result files
    sse.py        streaming chunk encoding
    server.py     the aiohttp app
    runner.py     SimServer (thread / process), serve_forever
    args.py       CLI flags shared with ``swarm-tui sim``
"""

from .args import add_arguments, config_from_args
from .config import SimConfig
from .runner import SimServer, serve_forever

__all__ = ["SimConfig", "SimServer", "serve_forever", "add_arguments", "config_from_args"]
