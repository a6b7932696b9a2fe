"""The simulator: an OpenAI-compatible chat-completions server on loopback.

It lets the product run with no key and no network, and it is the tests' and benchmarks'
endpoint. It models what real providers do (lognormal latency, RPM/TPM token buckets
answered with 429 + ``retry-after`` + ``x-ratelimit-*``, 5xx bursts, hung requests and
stalled streams, context-length errors, ``cached_tokens`` for a repeated prefix), and acts
as a tool-calling model when offered tools (``tools.py``), seeded and deterministic. It also
speaks OpenAI's Batch API (``/v1/files``, ``/v1/batches``) on a compressed clock.
Standalone: it imports neither Textual nor the rest of swarm_tui.

    config.py          SimConfig, the knobs
    core.py            Simulator: state, and the per-request decision as a pipeline of the stages below
    request.py         who may ask (down, key) and the request's validation
    faults.py          scripted markers and random faults
    rate_limits.py     RPM/TPM token buckets, ``retry-after`` and ``x-ratelimit-*``
    answering.py       what an admitted request is answered: tool step, verdict or final answer
    reply.py           the reply: a chat.completion or a stream plan, usage, writing time
    counters.py        what was really sent, for ``/sim/stats``
    tokens.py          token estimates
    draws.py           determinism: each request's seeded draws, bodies seen before
    prefix_cache.py    ``cached_tokens`` for a repeated prefix
    answers.py         the words of an answer: text, JSON, plans, stream pieces
    tools.py           pure rules of the tool-calling agent: tool rounds, calls, quoting
    tool_request.py    the request's tools and tool messages, checked as OpenAI checks them
    tool_arguments.py  a call's arguments from the tool's JSON schema
    judging.py         pure rules of the judge (verdicts) and of answer quality (drift, ``⟨qN⟩``)
    errors.py          OpenAI error bodies (and ``Refusal``, ``ApiError`` carrying one)
    batches.py         the Batch API: files and batches on a compressed clock, result files
    batch_files.py     uploaded files, and the batch input file's line-by-line checks
    batch_object.py    a batch as OpenAI shows it, and what creating one asks for
    sse.py             streaming chunk encoding
    server.py          the aiohttp app
    runner.py          SimServer (thread / process), serve_forever
    args.py            CLI flags shared with ``swarm-tui sim``
"""

from swarm_tui.sim.args import add_arguments, config_from_args
from swarm_tui.sim.config import SimConfig
from swarm_tui.sim.runner import SimServer, serve_forever

__all__ = ["SimConfig", "SimServer", "serve_forever", "add_arguments", "config_from_args"]
